# shellcheck shell=bash
# Sourced (not run) by capi/tests/seeds.sh and capi/tests/nvshmem_examples.sh, which build MPI
# programs with nvcc.
#
# mpi_flags MPICC: sets the array MPI_FLAGS to MPI's flags for nvcc, read from `MPICC -show`
# (the compiler, then -I/-L/-l/-Wl flags): -I/-L/-l as they are, the linker's -Wl,a,b as
# -Xlinker a -Xlinker b (nvcc takes no -Wl). MPICC empty: no flags.
mpi_flags() {
    local w x parts
    MPI_FLAGS=()
    [ -n "$1" ] || return 0
    for w in $("$1" -show); do
        case "$w" in
            -I* | -L* | -l*) MPI_FLAGS+=("$w") ;;
            -Wl,*) IFS=, read -ra parts <<< "${w#-Wl,}"; for x in "${parts[@]}"; do MPI_FLAGS+=(-Xlinker "$x"); done ;;
        esac
    done
}
