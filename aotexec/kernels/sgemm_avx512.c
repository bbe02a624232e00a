/* Batched f32 matmul for IREE llvm-cpu dispatches on x86-64 CPUs with AVX-512F.
 *
 * C[z] (M x N, row-major) = A[z] (M x K) * B[z] (K x N) for z in [0, batch): one workgroup
 * computes rows [wy*mc, +mc) x column panels [wx*pc, +pc) of batch wz. A is row-major
 * (a_trans = 0: A[i][k] at a[i*K + k]) or stored transposed (a_trans = 1: at a[k*M + i]);
 * B comes packed in 32-column panels, [ceil(N/32)][K][32], zero-padded past N (the emitter
 * packs it with StableHLO ops, which IREE hoists out of the call for resident weights).
 *
 * The register tile is 14 rows x 32 columns (28 zmm accumulators, two B vectors and one
 * broadcast per row per k): 16 loads for 28 FMAs, where IREE 3.13's own data-tiled f32 matmul
 * (16x16 tiles, 17 loads for 16 FMAs) is bound by the load ports.
 *
 * Built freestanding (no libc) and linked into IREE's embedded ELF: memrefs arrive as
 * (base, aligned, offset, size, stride) tuples, sizes as size_t.
 */
#include <stddef.h>
#include <immintrin.h>

#define MR 14
#define NR 32
#define MEMREF(T, n) T *n##_base, T *n, size_t n##_off, size_t n##_size, size_t n##_stride

/* acc (mr x nr of C at c, row stride ldc) = A rows (element (i, k) at a[i*si + k*sk]) x panel */
#define MICRO_KERNEL(name, SI, SK)                                                            \
  static inline __attribute__((always_inline)) void name(size_t K, const float *a, size_t lda, \
      const float *b, float *c, size_t ldc, size_t mr, size_t nr) {                           \
    __m512 c0[MR], c1[MR];                                                                    \
    _Pragma("GCC unroll 14") for (int i = 0; i < MR; i++) {                                   \
      c0[i] = _mm512_setzero_ps();                                                            \
      c1[i] = _mm512_setzero_ps();                                                            \
    }                                                                                         \
    if (mr == MR) {                                                                           \
      for (size_t k = 0; k < K; k++) {                                                        \
        __m512 b0 = _mm512_loadu_ps(b + NR * k), b1 = _mm512_loadu_ps(b + NR * k + 16);       \
        _Pragma("GCC unroll 14") for (int i = 0; i < MR; i++) {                               \
          __m512 av = _mm512_set1_ps(a[(SI) * i + (SK) * k]);                                 \
          c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);                                             \
          c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);                                             \
        }                                                                                     \
      }                                                                                       \
    } else {                                                                                  \
      for (size_t k = 0; k < K; k++) {                                                        \
        __m512 b0 = _mm512_loadu_ps(b + NR * k), b1 = _mm512_loadu_ps(b + NR * k + 16);       \
        for (size_t i = 0; i < mr; i++) {                                                     \
          __m512 av = _mm512_set1_ps(a[(SI) * i + (SK) * k]);                                 \
          c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);                                             \
          c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);                                             \
        }                                                                                     \
      }                                                                                       \
    }                                                                                         \
    __mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1u);                          \
    __mmask16 m1 = nr >= 32 ? 0xffff : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1u);    \
    for (size_t i = 0; i < mr; i++) {                                                         \
      _mm512_mask_storeu_ps(c + i * ldc, m0, c0[i]);                                          \
      _mm512_mask_storeu_ps(c + i * ldc + 16, m1, c1[i]);                                     \
    }                                                                                         \
  }

MICRO_KERNEL(micro_rows, lda, 1)     /* A row-major: lda = K */
MICRO_KERNEL(micro_cols, 1, lda)     /* A transposed: lda = M */

void aotexec_sgemm_workgroup(MEMREF(const float, a), MEMREF(const float, bp), MEMREF(float, c),
                             size_t M, size_t N, size_t K, size_t a_trans, size_t mc, size_t pc,
                             size_t wx, size_t wy, size_t wz) {
  size_t panels = (N + NR - 1) / NR;
  const float *A = a + a_off + wz * M * K;
  const float *B = bp + bp_off + wz * panels * K * NR;
  float *C = c + c_off + wz * M * N;
  size_t m0 = wy * mc, m1 = m0 + mc < M ? m0 + mc : M;
  size_t p0 = wx * pc, p1 = p0 + pc < panels ? p0 + pc : panels;
  for (size_t p = p0; p < p1; p++) {
    size_t n = p * NR, nr = N - n < NR ? N - n : NR;
    for (size_t m = m0; m < m1; m += MR) {
      size_t mr = m1 - m < MR ? m1 - m : MR;
      if (a_trans)
        micro_cols(K, A + m, M, B + p * K * NR, C + m * N + n, N, mr, nr);
      else
        micro_rows(K, A + m * K, K, B + p * K * NR, C + m * N + n, N, mr, nr);
    }
  }
}
