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
/* GB/s of reading up to `bytes` of the GPU's memory (best of 5), measured on the
 * backend's stream; 0 when b is not a CUDA backend or nothing could be measured. */
double backend_cuda_read_bandwidth(backend *b, size_t bytes);
/* Steps recorded as CUDA graphs and steps replayed from them so far (0 and 0
 * for another backend, or with LLC_CUDA_GRAPHS=0). */
void backend_cuda_graph_stats(backend *b, unsigned long *recorded, unsigned long *replayed);
/* Re-lays one row of the file's bytes as the GPU keeps it and decodes it on the
 * host with the GPU's own decoders (n_in floats into out): the layouts checked
 * without a GPU. LLC_ERR_UNSUPPORTED for F32 and the types the GPU lacks. */
int backend_cuda_decode_row_host(uint32_t type, const void *file_row, int64_t n_in, float *out);

#endif
