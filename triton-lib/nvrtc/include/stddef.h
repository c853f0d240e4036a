// NVRTC ships no C library headers; size_t and ptrdiff_t are whatever the compiler uses.
#ifndef RSHMEM_NVRTC_STDDEF_H
#define RSHMEM_NVRTC_STDDEF_H
typedef decltype(sizeof(0)) size_t;
typedef decltype((char*)0 - (char*)0) ptrdiff_t;
#ifndef NULL
#define NULL 0
#endif
#endif
