//! Bootstrap: how PEs find each other before any memory is shared (see the helper brief).
