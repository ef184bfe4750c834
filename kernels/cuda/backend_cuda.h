/* backend_cuda.h — the CUDA backend (kernels/cuda/backend_cuda.cu), built only when
 * the Makefile finds nvcc (it then defines LLC_CUDA). */
#ifndef LLC_BACKEND_CUDA_H
#define LLC_BACKEND_CUDA_H

#include <stdbool.h>

#include "kernels/backend.h"

#include <stddef.h>

/* True when a CUDA GPU can be used (driver present, a device whose compute
 * capability this build's code runs on). */
bool backend_cuda_available(void);
/* 0 when GPU 0 can be used; else a negative code and one line saying why. */
int backend_cuda_unusable_reason(char *why, size_t why_len);
/* The backend on GPU `device`; a clear error when there is none. */
int backend_cuda_create(int device, backend **out, llc_err *err);

#endif
