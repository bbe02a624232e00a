/* f32 matmul and convolution for IREE llvm-cpu dispatches on x86-64 CPUs with AVX-512F.
 *
 * Matmul (aotexec_sgemm_workgroup): C[z] (M x N, row-major) = A[z] (M x K) * B[z] (K x N) for z in [0, batch): one workgroup
 * computes rows [wy*mc, +mc) x column panels [wx*pc, +pc) of batch wz. A is row-major
 * (a_trans = 0: A[i][k] at a[i*K + k]) or stored transposed (a_trans = 1: at a[k*M + i]);
 * B comes packed in 32-column panels, [ceil(N/32)][K][32], zero-padded past N (the emitter
 * packs it with StableHLO ops, which IREE hoists out of the call for resident weights).
 *
 * The register tile is 14 rows x 32 columns (28 zmm accumulators, two B vectors and one
 * broadcast per row per k): 16 loads for 28 FMAs, where IREE 3.13's own data-tiled f32 matmul
 * (16x16 tiles, 17 loads for 16 FMAs) is bound by the load ports.
 *
 * Convolution (aotexec_conv_workgroup): the same tile as an implicit GEMM over a padded NHWC
 * input (conv.py).
 *
 * Both write their output rows (pixels) ldc / ldy floats apart from coff / yoff on: a window of
 * a wider output, so that a channel concatenation's parts are written in place (concat.py);
 * ldc = N, coff = 0 for a result of their own. A residual epilogue reads its operand with the
 * same stride, so it goes with a result of its own only.
 *
 * Built freestanding (no libc) and linked into IREE's embedded ELF: memrefs arrive as
 * (base, aligned, offset, size, stride) tuples, sizes as size_t.
 */
#include <stddef.h>
#include <immintrin.h>

#define MR 14
#define NR 32
#define MEMREF(T, n) T *n##_base, T *n, size_t n##_off, size_t n##_size, size_t n##_stride

/* An epilogue per output column, applied to a tile in registers before its store:
 * y = acc * scale + shift (+ the residual at the same position), then clamped to [lo, hi]: a
 * 1x1 layer's or a convolution's bias, BatchNorm, residual add and ReLU / ReLU6 in inference
 * (epilogue.py), which IREE would have fused into its own dispatch. From the call: one f32
 * operand holding scale[O], shift[O], lo, hi, and a residual operand laid out as the output. */
typedef struct {
  const float *scale, *shift;   /* the whole rows: a tile reads from its first column on */
  ptrdiff_t res;                /* residual - output, in floats, where has_res */
  float lo, hi;
  int has_res;
} epilogue_t;

static epilogue_t make_epilogue(const float *ep, size_t O, const float *res, const float *out, size_t has_res) {
  epilogue_t e = {ep, ep + O, res - out, ep[2 * O], ep[2 * O + 1], has_res != 0};
  return e;
}

/* Streaming kernels prefetch the rows (columns) they read this many ahead: a loop whose vector ops
 * wait on loads fills the core's FP scheduler before enough misses are in flight (the BatchNorm-ReLU
 * gradient sums at 64 channels read ~17 GB/s without, ~40 with; docs/PERFORMANCE.md). A prefetch
 * never faults, so the rows past the end need no test. */
#ifndef STREAM_PREFETCH_ROWS
#define STREAM_PREFETCH_ROWS 8
#endif
static inline __attribute__((always_inline)) void prefetch_row(const float *p) { _mm_prefetch((const char *)p, _MM_HINT_T0); }

/* The lanes of a 32-column tile's two vectors that hold columns [0, nr). */
static inline __mmask16 low_mask(size_t nr) { return nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1u); }
static inline __mmask16 high_mask(size_t nr) {
  return nr >= 32 ? 0xffff : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1u);
}

/* Stores rows [0, mr) of the tile, columns [0, nr) of column col on, through ep when not NULL. */
static inline __attribute__((always_inline)) void store_tile(__m512 *c0, __m512 *c1, const int mr, float *c,
    size_t ldc, size_t nr, const epilogue_t *ep, size_t col) {
  __mmask16 m0 = low_mask(nr), m1 = high_mask(nr);
  if (ep) {
    const float *scale = ep->scale + col, *shift = ep->shift + col;
    __m512 s0 = _mm512_maskz_loadu_ps(m0, scale), s1 = _mm512_maskz_loadu_ps(m1, scale + 16);
    __m512 t0 = _mm512_maskz_loadu_ps(m0, shift), t1 = _mm512_maskz_loadu_ps(m1, shift + 16);
    __m512 lo = _mm512_set1_ps(ep->lo), hi = _mm512_set1_ps(ep->hi);
    _Pragma("GCC unroll 14") for (int i = 0; i < mr; i++) {
      c0[i] = _mm512_fmadd_ps(c0[i], s0, t0);
      c1[i] = _mm512_fmadd_ps(c1[i], s1, t1);
      if (ep->has_res) {
        const float *r = c + i * ldc + ep->res;
        c0[i] = _mm512_add_ps(c0[i], _mm512_maskz_loadu_ps(m0, r));
        c1[i] = _mm512_add_ps(c1[i], _mm512_maskz_loadu_ps(m1, r + 16));
      }
      /* the bound first: max / min return their second operand where one is NaN, and a NaN
       * stays NaN as with stablehlo.maximum */
      c0[i] = _mm512_min_ps(hi, _mm512_max_ps(lo, c0[i]));
      c1[i] = _mm512_min_ps(hi, _mm512_max_ps(lo, c1[i]));
    }
  }
  _Pragma("GCC unroll 14") for (int i = 0; i < mr; i++) {
    _mm512_mask_storeu_ps(c + i * ldc, m0, c0[i]);
    _mm512_mask_storeu_ps(c + i * ldc + 16, m1, c1[i]);
  }
}

/* acc (mr x nr of C at c, row stride ldc) = A rows (element (i, k) at a[i*si + k*sk]) x panel */
#define MICRO_KERNEL(name, SI, SK)                                                            \
  static inline __attribute__((always_inline)) void name(size_t K, const float *a, size_t lda, \
      const float *b, float *c, size_t ldc, size_t mr, size_t nr, const epilogue_t *ep,         \
      size_t col) {                                                                           \
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
    if (mr == MR)                                                                             \
      store_tile(c0, c1, MR, c, ldc, nr, ep, col);                                            \
    else                                                                                      \
      for (size_t i = 0; i < mr; i++) store_tile(c0 + i, c1 + i, 1, c + i * ldc, ldc, nr, ep, col); \
  }

MICRO_KERNEL(micro_rows, lda, 1)     /* A row-major: lda = K */
MICRO_KERNEL(micro_cols, 1, lda)     /* A transposed: lda = M */

static void sgemm(const float *a, const float *bp, float *c, size_t M, size_t N, size_t K, size_t a_trans,
                  size_t mc, size_t pc, size_t ldc, size_t wx, size_t wy, size_t wz, const epilogue_t *ep) {
  size_t panels = (N + NR - 1) / NR;
  const float *A = a + wz * M * K;
  const float *B = bp + wz * panels * K * NR;
  float *C = c + wz * M * ldc;
  size_t m0 = wy * mc, m1 = m0 + mc < M ? m0 + mc : M;
  size_t p0 = wx * pc, p1 = p0 + pc < panels ? p0 + pc : panels;
  for (size_t p = p0; p < p1; p++) {
    size_t n = p * NR, nr = N - n < NR ? N - n : NR;
    for (size_t m = m0; m < m1; m += MR) {
      size_t mr = m1 - m < MR ? m1 - m : MR;
      if (a_trans)
        micro_cols(K, A + m, M, B + p * K * NR, C + m * ldc + n, ldc, mr, nr, ep, n);
      else
        micro_rows(K, A + m * K, K, B + p * K * NR, C + m * ldc + n, ldc, mr, nr, ep, n);
    }
  }
}

void aotexec_sgemm_workgroup(MEMREF(const float, a), MEMREF(const float, bp), MEMREF(float, c),
                             size_t M, size_t N, size_t K, size_t a_trans, size_t mc, size_t pc,
                             size_t ldc, size_t coff, size_t wx, size_t wy, size_t wz) {
  sgemm(a + a_off, bp + bp_off, c + c_off + coff, M, N, K, a_trans, mc, pc, ldc, wx, wy, wz, 0);
}

/* The same with the epilogue (one product: z = 0). */
void aotexec_sgemm_ep_workgroup(MEMREF(const float, a), MEMREF(const float, bp), MEMREF(const float, ep),
                                MEMREF(const float, res), MEMREF(float, c), size_t M, size_t N, size_t K,
                                size_t a_trans, size_t mc, size_t pc, size_t ldc, size_t coff, size_t has_res,
                                size_t wx, size_t wy) {
  epilogue_t e = make_epilogue(ep + ep_off, N, res + res_off, c + c_off + coff, has_res);
  sgemm(a + a_off, bp + bp_off, c + c_off + coff, M, N, K, a_trans, mc, pc, ldc, wx, wy, 0, &e);
}

/* Convolution, channels-last, its zero padding applied inside:
 *   y[n][oy][ox][o] = sum_{ky, kx, c} x[n][oy*sy + ky*dy - pt][ox*sx + kx*dx - pl][c] * w[ky][kx][c][o]
 * x is (N, H, W, C), zero outside [0, H) x [0, W); y (N, OH, OW, O); the weights packed like
 * B above with K = KH*KW*C ([ceil(O/32)][KH][KW][C][32]). A register tile is up to 14
 * consecutive output pixels of one output row x 32 channels: for each kernel offset the 14
 * pixels' inputs are rows of a matrix with row stride sx*C, so the tile accumulates over
 * (ky, kx, c) without an im2col copy. Kernel rows wholly in the padding are skipped; a tile
 * whose columns reach into the padding takes a pointer per pixel and kernel offset, to a row
 * of zeros for a pixel in the padding (as many registers as the row offsets of the plain
 * tile), so no padded input is ever written. Rows split
 * into balanced tiles (17 = 9 + 8, not 14 + 3). One workgroup: output rows (n, oy)
 * [wy*rc, +rc) x panels [wx*pc, +pc). geom packs KH, KW, sy, sx, dy, dx, pt, pl one byte each
 * (pt, pl < 128: the emitter's index constants are signed). */
#define CONV_ZEROS 1024    /* the zeros a pixel in the padding reads, channels per pass */

typedef struct {
  size_t H, W, C, KH, KW, sx, dy, dx;
  const float *zeros;           /* CONV_ZEROS of them */
} conv_shape_t;

/* acc += the tile's products for one kernel row: pixel i's input for (kx, k) at
 * a[i*lda + kx*col_step + k], the weights for (kx, k) at b[kx*b_step + k*NR]. */
static inline __attribute__((always_inline)) void conv_row_acc(const int mr, __m512 *c0, __m512 *c1,
    const float *a, size_t lda, size_t col_step, size_t KW, size_t nk, const float *b, size_t b_step) {
  for (size_t kx = 0; kx < KW; kx++) {
    const float *ak = a + kx * col_step;
    const float *bk = b + kx * b_step;
    for (size_t k = 0; k < nk; k++) {
      __m512 b0 = _mm512_loadu_ps(bk + NR * k), b1 = _mm512_loadu_ps(bk + NR * k + 16);
      _Pragma("GCC unroll 14") for (int i = 0; i < mr; i++) {
        __m512 av = _mm512_set1_ps(ak[lda * i + k]);
        c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
        c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
      }
    }
  }
}

/* acc += the tile's products for one kernel offset, pixel i's inputs at rows[i][0, nk) (a
 * pixel in the padding reads zeros), the weights at b[k*NR]. */
static inline __attribute__((always_inline)) void conv_offset_acc(const int mr, __m512 *c0, __m512 *c1,
    const float *const *rows, size_t nk, const float *b) {
  for (size_t k = 0; k < nk; k++) {
    __m512 b0 = _mm512_loadu_ps(b + NR * k), b1 = _mm512_loadu_ps(b + NR * k + 16);
    _Pragma("GCC unroll 14") for (int i = 0; i < mr; i++) {
      __m512 av = _mm512_set1_ps(rows[i][k]);
      c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
    }
  }
}

/* One tile: output pixels [ox0, +mr) of the output row whose input rows start at iy0 (kernel
 * rows [ky0, ky1) inside the image img), input columns from ix0 on (both may be negative). */
static inline __attribute__((always_inline)) void conv_tile(const int mr, const float *img, ptrdiff_t iy0,
    ptrdiff_t ix0, size_t ky0, size_t ky1, const conv_shape_t *s, const float *b, float *y, size_t ldy, size_t nr,
    const epilogue_t *ep, size_t col) {
  const size_t C = s->C, W = s->W, KW = s->KW, sx = s->sx, dx = s->dx;
  __m512 c0[MR], c1[MR];
  _Pragma("GCC unroll 14") for (int i = 0; i < mr; i++) {
    c0[i] = _mm512_setzero_ps();
    c1[i] = _mm512_setzero_ps();
  }
  size_t span = (size_t)(mr - 1) * sx + (KW - 1) * dx + 1;
  if (ix0 >= 0 && ix0 + (ptrdiff_t)span <= (ptrdiff_t)W) {
    for (size_t ky = ky0; ky < ky1; ky++) {
      const float *a = img + ((iy0 + (ptrdiff_t)(ky * s->dy)) * (ptrdiff_t)W + ix0) * (ptrdiff_t)C;
      conv_row_acc(mr, c0, c1, a, sx * C, dx * C, KW, C, b + ky * KW * C * NR, C * NR);
    }
  } else {
    for (size_t ky = ky0; ky < ky1; ky++) {
      const float *row = img + (iy0 + (ptrdiff_t)(ky * s->dy)) * (ptrdiff_t)(W * C);
      for (size_t kx = 0; kx < KW; kx++) {
        const float *bk = b + (ky * KW + kx) * C * NR;
        for (size_t c = 0; c < C; c += CONV_ZEROS) {
          const float *rows[MR];
          _Pragma("GCC unroll 14") for (int i = 0; i < mr; i++) {
            ptrdiff_t ix = ix0 + (ptrdiff_t)(i * sx + kx * dx);
            rows[i] = ix >= 0 && ix < (ptrdiff_t)W ? row + ix * (ptrdiff_t)C + c : s->zeros;
          }
          conv_offset_acc(mr, c0, c1, rows, C - c < CONV_ZEROS ? C - c : CONV_ZEROS, bk + c * NR);
        }
      }
    }
  }
  store_tile(c0, c1, mr, y, ldy, nr, ep, col);
}

#define CONV_TILE_CASE(R) \
  case R: conv_tile(R, img, iy0, ix0, ky0, ky1, s, b, y, ldy, nr, ep, col); break;

static void conv_tile_any(size_t mr, const float *img, ptrdiff_t iy0, ptrdiff_t ix0, size_t ky0, size_t ky1,
                          const conv_shape_t *s, const float *b, float *y, size_t ldy, size_t nr,
                          const epilogue_t *ep, size_t col) {
  switch (mr) {
    CONV_TILE_CASE(14) CONV_TILE_CASE(13) CONV_TILE_CASE(12) CONV_TILE_CASE(11) CONV_TILE_CASE(10)
    CONV_TILE_CASE(9) CONV_TILE_CASE(8) CONV_TILE_CASE(7) CONV_TILE_CASE(6) CONV_TILE_CASE(5)
    CONV_TILE_CASE(4) CONV_TILE_CASE(3) CONV_TILE_CASE(2) CONV_TILE_CASE(1)
    default: break;
  }
}

static void conv(const float *X, const float *B, float *Y, size_t N, size_t H, size_t W, size_t C, size_t OH,
                 size_t OW, size_t O, size_t geom, size_t rc, size_t pc, size_t ldy, size_t wx, size_t wy,
                 const epilogue_t *ep) {
  size_t KH = geom & 255, KW = (geom >> 8) & 255, sy = (geom >> 16) & 255, sx = (geom >> 24) & 255;
  size_t dy = (geom >> 32) & 255, dx = (geom >> 40) & 255;
  ptrdiff_t pt = (geom >> 48) & 255, pl = (geom >> 56) & 255;
  float zeros[CONV_ZEROS] __attribute__((aligned(64)));
  for (size_t k = 0; k < CONV_ZEROS; k += 16) _mm512_store_ps(zeros + k, _mm512_setzero_ps());
  conv_shape_t s = {H, W, C, KH, KW, sx, dy, dx, zeros};
  size_t panels = (O + NR - 1) / NR, K = KH * KW * C;
  size_t tiles = (OW + MR - 1) / MR;
  size_t r0 = wy * rc, r1 = r0 + rc < N * OH ? r0 + rc : N * OH;
  size_t p0 = wx * pc, p1 = p0 + pc < panels ? p0 + pc : panels;
  for (size_t p = p0; p < p1; p++) {
    size_t o = p * NR, nr = O - o < NR ? O - o : NR;
    for (size_t r = r0; r < r1; r++) {
      size_t n = r / OH, oy = r % OH;
      /* kernel rows inside the image: 0 <= iy0 + ky*dy < H */
      ptrdiff_t iy0 = (ptrdiff_t)(oy * sy) - pt, h = (ptrdiff_t)H, d = (ptrdiff_t)dy;
      size_t ky0 = iy0 < 0 ? (size_t)((-iy0 + d - 1) / d) : 0;
      size_t ky1 = iy0 >= h ? 0 : (size_t)((h - iy0 + d - 1) / d);
      ky1 = ky1 < KH ? ky1 : KH;
      ky0 = ky0 < ky1 ? ky0 : ky1;
      const float *img = X + n * H * W * C;
      float *yrow = Y + r * OW * ldy + o;
      for (size_t t = 0, ox = 0; t < tiles; t++) {
        size_t mr = (OW - ox) / (tiles - t) + ((OW - ox) % (tiles - t) != 0);
        conv_tile_any(mr, img, iy0, (ptrdiff_t)(ox * sx) - pl, ky0, ky1, &s, B + p * K * NR, yrow + ox * ldy,
                      ldy, nr, ep, o);
        ox += mr;
      }
    }
  }
}

void aotexec_conv_workgroup(MEMREF(const float, x), MEMREF(const float, wp), MEMREF(float, y),
                            size_t N, size_t H, size_t W, size_t C, size_t OH, size_t OW, size_t O,
                            size_t geom, size_t rc, size_t pc, size_t ldy, size_t yoff, size_t wx, size_t wy) {
  conv(x + x_off, wp + wp_off, y + y_off + yoff, N, H, W, C, OH, OW, O, geom, rc, pc, ldy, wx, wy, 0);
}

/* The same with the epilogue. */
void aotexec_conv_ep_workgroup(MEMREF(const float, x), MEMREF(const float, wp), MEMREF(const float, ep),
                               MEMREF(const float, res), MEMREF(float, y), size_t N, size_t H, size_t W,
                               size_t C, size_t OH, size_t OW, size_t O, size_t geom, size_t rc, size_t pc,
                               size_t ldy, size_t yoff, size_t has_res, size_t wx, size_t wy) {
  epilogue_t e = make_epilogue(ep + ep_off, O, res + res_off, y + y_off + yoff, has_res);
  conv(x + x_off, wp + wp_off, y + y_off + yoff, N, H, W, C, OH, OW, O, geom, rc, pc, ldy, wx, wy, &e);
}

/* The convolution's weight gradient, for dx = 1:
 *   dw[ky][kx][c][o] = sum_{n, oy, ox} x[n][oy*sy + ky*dy][ox*sx + kx][c] * g[n][oy][ox][o]
 * For one ky, dw[ky] is a (KW*C) x O matrix whose row i = kx*C + c reads, at each output pixel,
 * the input float i after the pixel's window start: rows are consecutive floats, so a
 * 14-row x 32-column tile accumulates over the pixels with one broadcast per row. x is padded
 * (N, HP, WP, C); g comes packed [ceil(O/32)][N*OH*OW][32] (once for every offset); dw is
 * (KH, KW, C, O). Pixels go in chunks of output rows (rc rows, a chunk of g in L2 for every
 * tile), the tiles' sums kept in dw between chunks. One workgroup: panel wx, kernel row wy. */
static inline __attribute__((always_inline)) void wgrad_tile(const int mr, const float *x, size_t row0,
    size_t row1, size_t OH, size_t OW, size_t HP, size_t WP, size_t C, size_t sy, size_t sx, size_t ky_rows,
    size_t i0, const float *gp, float *d, size_t ldd, size_t nr, int first) {
  __m512 c0[MR], c1[MR];
  __mmask16 m0 = low_mask(nr), m1 = high_mask(nr);
  _Pragma("GCC unroll 14") for (int i = 0; i < mr; i++) {
    c0[i] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, d + i * ldd);
    c1[i] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, d + i * ldd + 16);
  }
  for (size_t r = row0; r < row1; r++) {
    size_t n = r / OH, oy = r % OH;
    const float *a = x + ((n * HP + oy * sy + ky_rows) * WP) * C + i0;
    const float *b = gp + r * OW * NR;
    size_t step = sx * C;
    for (size_t ox = 0; ox < OW; ox++) {
      __m512 b0 = _mm512_loadu_ps(b + NR * ox), b1 = _mm512_loadu_ps(b + NR * ox + 16);
      const float *ap = a + ox * step;
      _Pragma("GCC unroll 14") for (int i = 0; i < mr; i++) {
        __m512 av = _mm512_set1_ps(ap[i]);
        c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
        c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
      }
    }
  }
  _Pragma("GCC unroll 14") for (int i = 0; i < mr; i++) {
    _mm512_mask_storeu_ps(d + i * ldd, m0, c0[i]);
    _mm512_mask_storeu_ps(d + i * ldd + 16, m1, c1[i]);
  }
}

#define WGRAD_TILE_CASE(R) \
  case R: wgrad_tile(R, x, row0, row1, OH, OW, HP, WP, C, sy, sx, ky_rows, i0, gp, d, ldd, nr, first); break;

static void wgrad_tile_any(size_t mr, const float *x, size_t row0, size_t row1, size_t OH, size_t OW,
                           size_t HP, size_t WP, size_t C, size_t sy, size_t sx, size_t ky_rows, size_t i0,
                           const float *gp, float *d, size_t ldd, size_t nr, int first) {
  switch (mr) {
    WGRAD_TILE_CASE(14) WGRAD_TILE_CASE(13) WGRAD_TILE_CASE(12) WGRAD_TILE_CASE(11) WGRAD_TILE_CASE(10)
    WGRAD_TILE_CASE(9) WGRAD_TILE_CASE(8) WGRAD_TILE_CASE(7) WGRAD_TILE_CASE(6) WGRAD_TILE_CASE(5)
    WGRAD_TILE_CASE(4) WGRAD_TILE_CASE(3) WGRAD_TILE_CASE(2) WGRAD_TILE_CASE(1)
    default: break;
  }
}

void aotexec_conv_wgrad_workgroup(MEMREF(const float, x), MEMREF(const float, gp), MEMREF(float, dw),
                                  size_t N, size_t HP, size_t WP, size_t C, size_t OH, size_t OW, size_t O,
                                  size_t geom, size_t rc, size_t wx, size_t wy) {
  size_t KW = (geom >> 8) & 255, sy = (geom >> 16) & 255, sx = (geom >> 24) & 255, dy = (geom >> 32) & 255;
  size_t M = KW * C, tiles = (M + MR - 1) / MR, rows = N * OH;
  size_t o = wx * NR, nr = O - o < NR ? O - o : NR;
  const float *X = x + x_off;
  const float *G = gp + gp_off + wx * rows * OW * NR;
  float *D = dw + dw_off + wy * M * O + o;
  for (size_t row0 = 0; row0 < rows; row0 += rc) {
    size_t row1 = row0 + rc < rows ? row0 + rc : rows;
    for (size_t t = 0, i0 = 0; t < tiles; t++) {
      size_t mr = (M - i0) / (tiles - t) + ((M - i0) % (tiles - t) != 0);
      wgrad_tile_any(mr, X, row0, row1, OH, OW, HP, WP, C, sy, sx, wy * dy, i0, G, D + i0 * O, O, nr, row0 == 0);
      i0 += mr;
    }
  }
}

/* Max pooling's input gradient, channels-last (pool.py): each window's gradient goes to its
 * first maximum in row-major order, positions in the padding never taken (MXNet's pool.h).
 * One workgroup per image (windows overlap: images are the units that share no element of
 * dx). Output rows in order: the input rows a row of windows reaches first are zeroed just
 * before (so dx is written once, from cache), then per window and 16-channel block, g is added
 * lane by lane at the position holding that lane's maximum (a masked add per position).
 * geom: kh | kw << 8 | sh << 16 | sw << 24 | pt << 32 | pl << 40 (leading pads; the trailing
 * ones follow from OH / OW). */
void aotexec_maxpool_grad_workgroup(MEMREF(const float, x), MEMREF(const float, g), MEMREF(float, dx),
                                    size_t N, size_t H, size_t W, size_t C, size_t OH, size_t OW, size_t geom,
                                    size_t wx, size_t wy) {
  const ptrdiff_t kh = geom & 255, kw = (geom >> 8) & 255, sh = (geom >> 16) & 255, sw = (geom >> 24) & 255;
  const ptrdiff_t pt = (geom >> 32) & 255, pl = (geom >> 40) & 255, w = (ptrdiff_t)W, c = (ptrdiff_t)C;
  const float *X = x + x_off + wy * H * W * C;
  const float *G = g + g_off + wy * OH * OW * C;
  float *D = dx + dx_off + wy * H * W * C;
  const __m512 zero = _mm512_setzero_ps();
  ptrdiff_t zeroed = 0;                 /* rows of D zeroed so far */
  (void)wx;
  for (ptrdiff_t oy = 0; oy <= (ptrdiff_t)OH; oy++) {
    ptrdiff_t y0 = oy * sh - pt, y1 = oy == (ptrdiff_t)OH ? (ptrdiff_t)H : y0 + kh;
    y0 = y0 < 0 ? 0 : y0;
    y1 = y1 > (ptrdiff_t)H ? (ptrdiff_t)H : y1;
    for (; zeroed < y1; zeroed++)
      for (ptrdiff_t i = 0; i < w * c; i += 16)
        _mm512_mask_storeu_ps(D + zeroed * w * c + i, w * c - i >= 16 ? 0xffff : (__mmask16)((1u << (w * c - i)) - 1u),
                              zero);
    if (oy == (ptrdiff_t)OH) break;
    for (ptrdiff_t ox = 0; ox < (ptrdiff_t)OW; ox++) {
      ptrdiff_t x0 = ox * sw - pl, x1 = x0 + kw;
      x0 = x0 < 0 ? 0 : x0;
      x1 = x1 > w ? w : x1;
      if (y0 >= y1 || x0 >= x1) continue;
      for (ptrdiff_t c0 = 0; c0 < c; c0 += 16) {
        const __mmask16 m = c - c0 >= 16 ? 0xffff : (__mmask16)((1u << (c - c0)) - 1u);
        __m512 best = _mm512_maskz_loadu_ps(m, X + (y0 * w + x0) * c + c0);
        __m512i arg = _mm512_setzero_si512();
        int k = 0;
        for (ptrdiff_t iy = y0; iy < y1; iy++)
          for (ptrdiff_t ix = x0; ix < x1; ix++, k++) {
            __m512 v = _mm512_maskz_loadu_ps(m, X + (iy * w + ix) * c + c0);
            __mmask16 gt = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ);
            best = _mm512_mask_mov_ps(best, gt, v);
            arg = _mm512_mask_mov_epi32(arg, gt, _mm512_set1_epi32(k));
          }
        const __m512 gv = _mm512_maskz_loadu_ps(m, G + (oy * (ptrdiff_t)OW + ox) * c + c0);
        k = 0;
        for (ptrdiff_t iy = y0; iy < y1; iy++)
          for (ptrdiff_t ix = x0; ix < x1; ix++, k++) {
            /* no branch on hit: which position holds a lane's maximum is data, and the mispredicted
             * branch cost more than the empty masked add (SqueezeNet's pools 10-25% faster) */
            __mmask16 hit = _mm512_mask_cmpeq_epi32_mask(m, arg, _mm512_set1_epi32(k));
            float *d = D + (iy * w + ix) * c + c0;
            _mm512_mask_storeu_ps(d, hit, _mm512_add_ps(_mm512_maskz_loadu_ps(hit, d), gv));
          }
      }
    }
  }
}

/* Depthwise 3x3 convolution's weight gradient, channels-last, padding inside:
 *   part[z][ky*3 + kx][c] = sum_{oy in rows of z, ox} g[n][oy][ox][c] * x[n][oy*sy + ky*dy - pt][ox*sx + kx*dx - pl][c]
 * (x zero outside [0, H) x [0, W)), one workgroup per (block of `rows` output rows wx, image wy), z = wy * groups_x + wx;
 * the caller sums the parts. Per output row and 32-channel block the nine taps accumulate in registers over the
 * row, then add into the part, which stays in L1 (9 x C floats); the input rows a row of windows reads stay in L2
 * across the channel blocks. x and g are each read once per workgroup. */

/* One input row's three taps over output columns [ox0, ox1) (xr, gr: the rows at the channel block); `check`:
 * columns may fall outside the input (the borders) */
static inline __attribute__((always_inline)) void dwgrad_row(__m512 *a0, __m512 *a1, const float *xr, const float *gr,
    ptrdiff_t ox0, ptrdiff_t ox1, ptrdiff_t c, ptrdiff_t sw, ptrdiff_t dw, ptrdiff_t pl, ptrdiff_t w, __mmask16 m0,
    __mmask16 m1, const int check) {
  for (ptrdiff_t ox = ox0; ox < ox1; ox++) {
    /* the columns STREAM_PREFETCH_ROWS ahead (MobileNet's 16x112x112x32 layer 5.2 -> 3.6 ms) */
    const ptrdiff_t ahead = ox + STREAM_PREFETCH_ROWS;
    prefetch_row(gr + ahead * c);
    prefetch_row(xr + ahead * sw * c);
    if (m1) {
      prefetch_row(gr + ahead * c + 16);
      prefetch_row(xr + ahead * sw * c + 16);
    }
    const __m512 g0 = _mm512_maskz_loadu_ps(m0, gr + ox * c), g1 = _mm512_maskz_loadu_ps(m1, gr + ox * c + 16);
    _Pragma("GCC unroll 3") for (int kx = 0; kx < 3; kx++) {
      const ptrdiff_t ix = ox * sw + kx * dw - pl;
      if (check && (ix < 0 || ix >= w)) continue;
      a0[kx] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, xr + ix * c), g0, a0[kx]);
      a1[kx] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, xr + ix * c + 16), g1, a1[kx]);
    }
  }
}

void aotexec_dwgrad_workgroup(MEMREF(const float, x), MEMREF(const float, g), MEMREF(float, part),
                              size_t N, size_t H, size_t W, size_t C, size_t OH, size_t OW, size_t geom, size_t rows,
                              size_t wx, size_t wy) {
  const ptrdiff_t sh = geom & 255, sw = (geom >> 8) & 255, dh = (geom >> 16) & 255, dw = (geom >> 24) & 255;
  const ptrdiff_t pt = (geom >> 32) & 255, pl = (geom >> 40) & 255, h = (ptrdiff_t)H, w = (ptrdiff_t)W;
  const ptrdiff_t c = (ptrdiff_t)C, ow = (ptrdiff_t)OW, groups_x = ((ptrdiff_t)OH + (ptrdiff_t)rows - 1) / (ptrdiff_t)rows;
  const float *X = x + x_off + wy * H * W * C;
  const float *G = g + g_off + wy * OH * OW * C;
  float *P = part + part_off + (wy * groups_x + wx) * 9 * C;
  (void)N;
  /* output columns whose three taps all fall inside the input */
  ptrdiff_t lo = (pl + sw - 1) / sw, hi = (w - 2 * dw + pl + sw - 1) / sw;
  lo = lo > ow ? ow : lo;
  hi = hi < lo ? lo : hi > ow ? ow : hi;
  for (ptrdiff_t i = 0; i < 9 * c; i += 16)
    _mm512_mask_storeu_ps(P + i, 9 * c - i >= 16 ? 0xffff : (__mmask16)((1u << (9 * c - i)) - 1u), _mm512_setzero_ps());
  const ptrdiff_t oy0 = wx * rows, oy1 = oy0 + (ptrdiff_t)rows < (ptrdiff_t)OH ? oy0 + (ptrdiff_t)rows : (ptrdiff_t)OH;
  for (ptrdiff_t oy = oy0; oy < oy1; oy++) {
    for (ptrdiff_t c0 = 0; c0 < c; c0 += 32) {
      const __mmask16 m0 = low_mask(c - c0), m1 = high_mask(c - c0);
      const float *gr = G + oy * ow * c + c0;
      __m512 a0[9], a1[9];
      _Pragma("GCC unroll 9") for (int t = 0; t < 9; t++) {
        a0[t] = _mm512_setzero_ps();
        a1[t] = _mm512_setzero_ps();
      }
      _Pragma("GCC unroll 3") for (int ky = 0; ky < 3; ky++) {
        const ptrdiff_t iy = oy * sh + ky * dh - pt;
        if (iy < 0 || iy >= h) continue;
        const float *xr = X + iy * w * c + c0;
        dwgrad_row(a0 + 3 * ky, a1 + 3 * ky, xr, gr, 0, lo, c, sw, dw, pl, w, m0, m1, 1);
        dwgrad_row(a0 + 3 * ky, a1 + 3 * ky, xr, gr, lo, hi, c, sw, dw, pl, w, m0, m1, 0);
        dwgrad_row(a0 + 3 * ky, a1 + 3 * ky, xr, gr, hi, ow, c, sw, dw, pl, w, m0, m1, 1);
      }
      _Pragma("GCC unroll 9") for (int t = 0; t < 9; t++) {
        float *p = P + t * c + c0;
        _mm512_mask_storeu_ps(p, m0, _mm512_add_ps(_mm512_maskz_loadu_ps(m0, p), a0[t]));
        _mm512_mask_storeu_ps(p + 16, m1, _mm512_add_ps(_mm512_maskz_loadu_ps(m1, p + 16), a1[t]));
      }
    }
  }
}

/* Column statistics of a row-major (R x C) matrix (BatchNorm's batch statistics, channels-last):
 * one workgroup per block of `rows` rows (wy), writing the block's mean and its sum of squared
 * deviations from that mean, stats[wy][0][c] and stats[wy][1][c]; the caller combines the blocks
 * (Chan et al.'s parallel variance). The block (rows x C floats, sized by the caller to stay in
 * L2) is read twice, from memory once; 64 columns at a time in registers, summed 16 rows at a
 * time before adding into the block's sums (one float sum over a thousand rows loses ~1e-6). */
#define COLSTATS_RUN 16


void aotexec_colstats_workgroup(MEMREF(const float, x), MEMREF(float, stats), size_t R, size_t C, size_t rows,
                                size_t wx, size_t wy) {
  const ptrdiff_t c = (ptrdiff_t)C, r0 = (ptrdiff_t)(wy * rows);
  const ptrdiff_t r1 = r0 + (ptrdiff_t)rows < (ptrdiff_t)R ? r0 + (ptrdiff_t)rows : (ptrdiff_t)R;
  const float *X = x + x_off;
  float *S = stats + stats_off + wy * 2 * C;
  const __m512 inv = _mm512_set1_ps(1.0f / (float)(r1 - r0));
  (void)wx;
  for (ptrdiff_t c0 = 0; c0 < c; c0 += 64) {
    __mmask16 m[4];
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
      ptrdiff_t left = c - c0 - 16 * j;
      m[j] = left >= 16 ? 0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1u);
    }
    __m512 s[4], run[4], mean[4];
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) s[j] = _mm512_setzero_ps();
    for (ptrdiff_t i0 = r0; i0 < r1; i0 += COLSTATS_RUN) {
      const ptrdiff_t i1 = i0 + COLSTATS_RUN < r1 ? i0 + COLSTATS_RUN : r1;
      _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) run[j] = _mm512_setzero_ps();
      for (ptrdiff_t i = i0; i < i1; i++)
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
          if (m[j]) prefetch_row(X + (i + STREAM_PREFETCH_ROWS) * c + c0 + 16 * j);
          run[j] = _mm512_add_ps(run[j], _mm512_maskz_loadu_ps(m[j], X + i * c + c0 + 16 * j));
        }
      _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) s[j] = _mm512_add_ps(s[j], run[j]);
    }
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
      mean[j] = _mm512_mul_ps(s[j], inv);
      s[j] = _mm512_setzero_ps();       /* now the squared deviations' sums */
    }
    for (ptrdiff_t i0 = r0; i0 < r1; i0 += COLSTATS_RUN) {
      const ptrdiff_t i1 = i0 + COLSTATS_RUN < r1 ? i0 + COLSTATS_RUN : r1;
      _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) run[j] = _mm512_setzero_ps();
      for (ptrdiff_t i = i0; i < i1; i++)
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
          const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(m[j], X + i * c + c0 + 16 * j), mean[j]);
          run[j] = _mm512_fmadd_ps(d, d, run[j]);
        }
      _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) s[j] = _mm512_add_ps(s[j], run[j]);
    }
    /* masked-off lanes are dropped by the stores */
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
      _mm512_mask_storeu_ps(S + c0 + 16 * j, m[j], mean[j]);
      _mm512_mask_storeu_ps(S + c + c0 + 16 * j, m[j], s[j]);
    }
  }
}

/* The blocks of aotexec_colstats_workgroup combined (one workgroup, double precision): out[0][c] the mean,
 * out[1][c] the biased variance over all R rows; blocks hold `rows` rows, the last one the rest. */
void aotexec_colstats_combine_workgroup(MEMREF(const float, stats), MEMREF(float, out), size_t R, size_t C,
                                        size_t rows, size_t wx, size_t wy) {
  const ptrdiff_t c = (ptrdiff_t)C, groups = (ptrdiff_t)((R + rows - 1) / rows);
  const float *S = stats + stats_off;
  float *O = out + out_off;
  const double last = (double)(R - rows * (size_t)(groups - 1));
  (void)wx; (void)wy;
  for (ptrdiff_t c0 = 0; c0 < c; c0 += 8) {
    const __mmask8 m = c - c0 >= 8 ? 0xff : (__mmask8)((1u << (c - c0)) - 1u);
    __m512d s = _mm512_setzero_pd(), q = _mm512_setzero_pd();
    for (ptrdiff_t b = 0; b < groups; b++) {
      const __m512d n = _mm512_set1_pd(b == groups - 1 ? last : (double)rows);
      s = _mm512_fmadd_pd(n, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, S + b * 2 * c + c0)), s);
    }
    const __m512d mean = _mm512_div_pd(s, _mm512_set1_pd((double)R));
    for (ptrdiff_t b = 0; b < groups; b++) {
      const __m512d n = _mm512_set1_pd(b == groups - 1 ? last : (double)rows);
      const __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, S + b * 2 * c + c0)), mean);
      q = _mm512_add_pd(q, _mm512_fmadd_pd(_mm512_mul_pd(n, d), d, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, S + b * 2 * c + c + c0))));
    }
    _mm256_mask_storeu_ps(O + c0, m, _mm512_cvtpd_ps(mean));
    _mm256_mask_storeu_ps(O + c + c0, m, _mm512_cvtpd_ps(_mm512_div_pd(q, _mm512_set1_pd((double)R))));
  }
}

/* BatchNorm's gradient sums over a row-major (R x C) block of rows (wy): part[wy][0][c] = sum g,
 * part[wy][1][c] = sum g * (x - mean[c]), summed 16 rows at a time (as colstats). With `relu`, g is
 * dz where the layer's ReLU passed its output, (x - mean[c]) * scale[c] + shift[c] > 0 (the
 * forward's own operations, not contracted: -std=c11 keeps -ffp-contract=off), else 0. */
static inline __m512 bn_relu_mask(__m512 dz, __m512 xc, __m512 scale, __m512 shift) {
  const __m512 y = _mm512_add_ps(_mm512_mul_ps(xc, scale), shift);
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_GT_OQ), dz);
}

static inline __attribute__((always_inline)) void bngrad_sums(const float *G, const float *X, const float *M,
                                                               const float *S, const float *B, float *P, ptrdiff_t c,
                                                               ptrdiff_t r0, ptrdiff_t r1, int relu) {
  /* 64 columns at a time (whole rows of 64-channel maps: one pass over memory), each run's sums
   * added into P (in L1, which frees the registers the ReLU's scale and shift take) */
  for (ptrdiff_t c0 = 0; c0 < c; c0 += 64) {
    __mmask16 m[4];
    __m512 mu[4], sc[4], sh[4], a[4], q[4];
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
      ptrdiff_t left = c - c0 - 16 * j;
      m[j] = left >= 16 ? 0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1u);
      mu[j] = _mm512_maskz_loadu_ps(m[j], M + c0 + 16 * j);
      sc[j] = relu ? _mm512_maskz_loadu_ps(m[j], S + c0 + 16 * j) : mu[j];
      sh[j] = relu ? _mm512_maskz_loadu_ps(m[j], B + c0 + 16 * j) : mu[j];
      _mm512_mask_storeu_ps(P + c0 + 16 * j, m[j], _mm512_setzero_ps());
      _mm512_mask_storeu_ps(P + c + c0 + 16 * j, m[j], _mm512_setzero_ps());
    }
    for (ptrdiff_t i0 = r0; i0 < r1; i0 += COLSTATS_RUN) {
      const ptrdiff_t i1 = i0 + COLSTATS_RUN < r1 ? i0 + COLSTATS_RUN : r1;
      _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) a[j] = q[j] = _mm512_setzero_ps();
      for (ptrdiff_t i = i0; i < i1; i++)
        _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
          if (m[j]) {
            prefetch_row(G + (i + STREAM_PREFETCH_ROWS) * c + c0 + 16 * j);
            prefetch_row(X + (i + STREAM_PREFETCH_ROWS) * c + c0 + 16 * j);
          }
          __m512 g = _mm512_maskz_loadu_ps(m[j], G + i * c + c0 + 16 * j);
          const __m512 xc = _mm512_sub_ps(_mm512_maskz_loadu_ps(m[j], X + i * c + c0 + 16 * j), mu[j]);
          if (relu) g = bn_relu_mask(g, xc, sc[j], sh[j]);
          a[j] = _mm512_add_ps(a[j], g);
          q[j] = _mm512_fmadd_ps(g, xc, q[j]);
        }
      _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {
        float *ps = P + c0 + 16 * j, *pq = P + c + c0 + 16 * j;
        _mm512_mask_storeu_ps(ps, m[j], _mm512_add_ps(_mm512_maskz_loadu_ps(m[j], ps), a[j]));
        _mm512_mask_storeu_ps(pq, m[j], _mm512_add_ps(_mm512_maskz_loadu_ps(m[j], pq), q[j]));
      }
    }
  }
}

static inline ptrdiff_t block_end(size_t R, size_t rows, size_t wy) {
  const size_t r1 = (wy + 1) * rows;
  return (ptrdiff_t)(r1 < R ? r1 : R);
}

void aotexec_bngrad_sums_workgroup(MEMREF(const float, g), MEMREF(const float, x), MEMREF(const float, mean),
                                   MEMREF(float, part), size_t R, size_t C, size_t rows, size_t wx, size_t wy) {
  (void)wx;
  bngrad_sums(g + g_off, x + x_off, mean + mean_off, 0, 0, part + part_off + wy * 2 * C, (ptrdiff_t)C,
              (ptrdiff_t)(wy * rows), block_end(R, rows, wy), 0);
}

/* The same through the ReLU after the layer: `dz` its output gradient, `msb` (3 x C) the mean, the
 * scale and the shift forward normalized with. */
void aotexec_bnrelu_grad_sums_workgroup(MEMREF(const float, dz), MEMREF(const float, x), MEMREF(const float, msb),
                                        MEMREF(float, part), size_t R, size_t C, size_t rows, size_t wx, size_t wy) {
  const float *A = msb + msb_off;
  (void)wx;
  bngrad_sums(dz + dz_off, x + x_off, A, A + C, A + 2 * C, part + part_off + wy * 2 * C, (ptrdiff_t)C,
              (ptrdiff_t)(wy * rows), block_end(R, rows, wy), 1);
}

/* The (G x K) parts summed over G (one workgroup, double precision): out[k]. */
void aotexec_sum_parts_workgroup(MEMREF(const float, part), MEMREF(float, out), size_t G, size_t K, size_t wx,
                                 size_t wy) {
  const float *P = part + part_off;
  float *O = out + out_off;
  (void)wx; (void)wy;
  for (size_t k0 = 0; k0 < K; k0 += 8) {
    const __mmask8 m = K - k0 >= 8 ? 0xff : (__mmask8)((1u << (K - k0)) - 1u);
    __m512d s = _mm512_setzero_pd();
    for (size_t b = 0; b < G; b++) s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, P + b * K + k0)));
    _mm256_mask_storeu_ps(O + k0, m, _mm512_cvtpd_ps(s));
  }
}

/* Winograd tiles of a channels-last (N x H x W x C) map (``ops.winograd``): for tile (n, ty, tx) and
 * p = (n * TH + ty) * TW + tx, out[b * T + a][p][c] = sum_{i, j < I} M[a][i] M[b][j]
 * x[n][ty * s + i - pt][tx * s + j - pl][c], x zero outside the map; M (T x I, row-major) is the
 * transform's matrix. Each of the T^2 streams holds R >= N * TH * TW rows, those past the tiles
 * zero (the last tile row's workgroups write them): a stride the caller picks off multiples of
 * 4 KB, which made a tile's T^2 stores contend for the same L1 sets (2-4x slower). With ``packed``
 * each stream is laid out as the matmul kernel's B, [ceil(C/32)][R][32] zero-padded past C (the
 * weight gradient's tiles of g: IREE's packing transpose ran at ~3 GB/s). One workgroup per
 * (tile row wy = n * TH + ty, block of WINO_CHANNELS channels wx); per tile and 16 channels, the
 * rows' transforms go through L1 (T x I vectors), zero coefficients skipped. Written in place of
 * IREE's form, whose rows were stacked by copies (docs/PERFORMANCE.md). */
#define WINO_MAX 8
#define WINO_CHANNELS 256

/* acc + k d, k known at compile time where the caller unrolls over a constant matrix: zeros
 * skipped, +-1 an add or a subtraction */
static inline __attribute__((always_inline)) __m512 wino_madd(float k, __m512 d, __m512 acc) {
  if (k == 0.0f) return acc;
  if (k == 1.0f) return _mm512_add_ps(acc, d);
  if (k == -1.0f) return _mm512_sub_ps(acc, d);
  return _mm512_fmadd_ps(_mm512_set1_ps(k), d, acc);
}

/* One workgroup's tiles for the T x I matrix K (T, I and K constant where the caller specializes
 * it: the loops unrolled, the coefficients folded into adds, subtractions and FMAs) */
static inline __attribute__((always_inline)) void wino_tiles(const float *X, const float *K, float *O, ptrdiff_t h,
    ptrdiff_t w, ptrdiff_t c, ptrdiff_t th, ptrdiff_t tw, const ptrdiff_t t, const ptrdiff_t ni, ptrdiff_t s, ptrdiff_t pt,
    ptrdiff_t pl, ptrdiff_t n, ptrdiff_t ty, ptrdiff_t tiles, ptrdiff_t c0, ptrdiff_t c1, ptrdiff_t cend, int packed) {
  __m512 cols[WINO_MAX][WINO_MAX];            /* cols[a][j]: input column j transformed along H */
  const ptrdiff_t panels = (c + NR - 1) / NR;
  for (ptrdiff_t tx = 0; tx < tw; tx++) {
    const ptrdiff_t p = (n * th + ty) * tw + tx;
    for (ptrdiff_t cc = c0; cc < cend; cc += 16) {
      const __mmask16 m = cc < c1 ? low_mask((size_t)(c1 - cc)) : 0;
      _Pragma("GCC unroll 8") for (ptrdiff_t j = 0; j < ni; j++) {
        const ptrdiff_t ix = tx * s + j - pl;
        __m512 d[WINO_MAX];
        _Pragma("GCC unroll 8") for (ptrdiff_t i = 0; i < ni; i++) {
          const ptrdiff_t iy = ty * s + i - pt;
          d[i] = iy >= 0 && iy < h && ix >= 0 && ix < w
                     ? _mm512_maskz_loadu_ps(m, X + ((n * h + iy) * w + ix) * c + cc) : _mm512_setzero_ps();
        }
        _Pragma("GCC unroll 8") for (ptrdiff_t a = 0; a < t; a++) {
          __m512 acc = _mm512_setzero_ps();
          _Pragma("GCC unroll 8") for (ptrdiff_t i = 0; i < ni; i++) acc = wino_madd(K[a * ni + i], d[i], acc);
          cols[a][j] = acc;
        }
      }
      _Pragma("GCC unroll 8") for (ptrdiff_t a = 0; a < t; a++)
        _Pragma("GCC unroll 8") for (ptrdiff_t bb = 0; bb < t; bb++) {
          __m512 acc = _mm512_setzero_ps();
          _Pragma("GCC unroll 8") for (ptrdiff_t j = 0; j < ni; j++) acc = wino_madd(K[bb * ni + j], cols[a][j], acc);
          const ptrdiff_t q = bb * t + a;
          if (packed)     /* whole panels: the lanes past C are zero (masked loads) */
            _mm512_storeu_ps(O + ((q * panels + cc / NR) * tiles + p) * NR + cc % NR, acc);
          else
            _mm512_mask_storeu_ps(O + (q * tiles + p) * c + cc, m, acc);
        }
    }
  }
}

/* ops.winograd.TRANSFORMS' B^T and A^T^T for F(2x2) and F(4x4), as literals (a table in .rodata
 * would need an absolute relocation): a matrix the caller passes that equals one of them runs the
 * specialized code, any other the generic loops */
#define WINO_BT2 {1, 0, -1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, 1, 0, -1}
#define WINO_AT2 {1, 0, 1, 1, 1, -1, 0, -1}
#define WINO_BT4 {4, 0, -5, 0, 1, 0, 0, -4, -4, 1, 1, 0, 0, 4, -4, -1, 1, 0, 0, -2, -1, 2, 1, 0, 0, 2, -1, -2, 1, 0, 0, 4, 0, -5, 0, 1}
#define WINO_AT4 {1, 0, 0, 0, 1, 1, 1, 1, 1, -1, 1, -1, 1, 2, 4, 8, 1, -2, 4, -8, 0, 0, 0, 1}

static inline __attribute__((always_inline)) int wino_same(const float *a, const float *b, const int count) {
  int same = 1;
  _Pragma("GCC unroll 36") for (int i = 0; i < count; i++) same &= a[i] == b[i];
  return same;
}

void aotexec_wino_tiles_workgroup(MEMREF(const float, x), MEMREF(const float, mat), MEMREF(float, out),
                                  size_t N, size_t H, size_t W, size_t C, size_t TH, size_t TW, size_t T, size_t I,
                                  size_t s, size_t pt, size_t pl, size_t R, size_t packed, size_t wx, size_t wy) {
  const float *X = x + x_off, *M = mat + mat_off;
  float *O = out + out_off;
  const ptrdiff_t c = (ptrdiff_t)C, th = (ptrdiff_t)TH, tiles = (ptrdiff_t)R;
  const ptrdiff_t n = (ptrdiff_t)wy / th, ty = (ptrdiff_t)wy % th;
  const ptrdiff_t c0 = (ptrdiff_t)(wx * WINO_CHANNELS), c1 = c0 + WINO_CHANNELS < c ? c0 + WINO_CHANNELS : c;
  /* the channels written: packed, up to the end of the last panel */
  const ptrdiff_t cend = packed ? (c1 + NR - 1) / NR * NR : c1, panels = (c + NR - 1) / NR;
  if (wy + 1 == N * TH)
    for (ptrdiff_t q = 0; q < (ptrdiff_t)(T * T); q++)
      for (ptrdiff_t p = (ptrdiff_t)(N * TH * TW); p < tiles; p++)
        for (ptrdiff_t cc = c0; cc < cend; cc += 16) {
          if (packed)
            _mm512_storeu_ps(O + ((q * panels + cc / NR) * tiles + p) * NR + cc % NR, _mm512_setzero_ps());
          else
            _mm512_mask_storeu_ps(O + (q * tiles + p) * c + cc, low_mask((size_t)(c1 - cc)), _mm512_setzero_ps());
        }
#define WINO_CASE(values, tt, ii) \
  if (T == tt && I == ii) { \
    const float table[tt * ii] = values; \
    if (wino_same(M, table, tt * ii)) { \
      wino_tiles(X, table, O, (ptrdiff_t)H, (ptrdiff_t)W, c, th, (ptrdiff_t)TW, tt, ii, (ptrdiff_t)s, (ptrdiff_t)pt, \
                 (ptrdiff_t)pl, n, ty, tiles, c0, c1, cend, packed != 0); \
      return; \
    } \
  }
  WINO_CASE(WINO_BT2, 4, 4) WINO_CASE(WINO_BT4, 6, 6) WINO_CASE(WINO_AT2, 4, 2) WINO_CASE(WINO_AT4, 6, 4)
#undef WINO_CASE
  wino_tiles(X, M, O, (ptrdiff_t)H, (ptrdiff_t)W, c, th, (ptrdiff_t)TW, (ptrdiff_t)T, (ptrdiff_t)I, (ptrdiff_t)s,
             (ptrdiff_t)pt, (ptrdiff_t)pl, n, ty, tiles, c0, c1, cend, packed != 0);
}
