/* backend_cuda.h — the CUDA backend (kernels/cuda/backend_cuda.cu), built only when
 * the Makefile finds nvcc (it then defines LLC_CUDA). */
#ifndef LLC_BACKEND_CUDA_H
#define LLC_BACKEND_CUDA_H

#include <stdbool.h>

#include "kernels/backend.h"

/* True when a CUDA GPU can be used (driver present, at least one device). */
bool backend_cuda_available(void);
/* The backend on GPU `device`; a clear error when there is none. */
int backend_cuda_create(int device, backend **out, llc_err *err);

#endif
