/*===- loomrt.h - The C ABI between generated code and libloomrt ---------===*
 *
 * Generated per-rank programs describe their model (mesh, parameters,
 * inputs, outputs, arena size) in a `loomrt_model` and hand it to
 * `loomrt_main`, which owns everything that is not the step itself: the
 * ranks and how they reach each other (MPI, NCCL or loopback), options,
 * the arena, initial values, tensor I/O, timing and the watchdog.
 * The step calls back into the runtime for collectives and for the kernels
 * that are not generated inline (GEMMs through BLAS, row reductions).
 *
 * The ABI is C so that the CUDA backend and other languages can share it.
 * Shapes are row-major; every pointer is into the rank's arena or into
 * constant data of the generated program.
 *===----------------------------------------------------------------------===*/
#ifndef LOOMRT_H
#define LOOMRT_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types (the numbering is shared with runtime/Safetensors.h). */
enum { LOOMRT_F32 = 0, LOOMRT_BF16 = 1, LOOMRT_F16 = 2, LOOMRT_I32 = 3, LOOMRT_I64 = 4 };
/* Reductions of all_reduce / reduce_scatter / loomrt_reduce. */
enum { LOOMRT_SUM = 0, LOOMRT_MAX = 1 };
/* Parameter initialisers (docs/language.md, 8.2). */
enum {
  LOOMRT_INIT_ZEROS = 0,
  LOOMRT_INIT_ONES = 1,
  LOOMRT_INIT_NORMAL = 2,  /* a = mean, b = std */
  LOOMRT_INIT_UNIFORM = 3, /* a = low, b = high */
  LOOMRT_INIT_INPUT = 4    /* a synthetic model input (see loomrt_main) */
};

#define LOOMRT_MAX_RANK 8
#define LOOMRT_MAX_DIM_AXES 4

/* A global tensor that crosses the program's boundary: a parameter, a model
 * input or a model output, with its sharding and where it lives. */
typedef struct {
  const char *name;
  int dtype;
  int rank;
  int64_t global_shape[LOOMRT_MAX_RANK];
  int64_t local_shape[LOOMRT_MAX_RANK];
  /* Mesh axes (indices into the mesh) that split each dimension, major to
   * minor; num_dim_axes[d] of them. */
  int num_dim_axes[LOOMRT_MAX_RANK];
  int dim_axes[LOOMRT_MAX_RANK][LOOMRT_MAX_DIM_AXES];
  /* Byte offset of the local piece in the arena. */
  int64_t arena_offset;
  /* Parameters: LOOMRT_INIT_*, with its two constants. */
  int init;
  double init_a, init_b;
  /* Integer inputs: synthetic values are uniform in [0, int_bound). */
  int64_t int_bound;
} loomrt_tensor;

typedef struct loomrt_ctx loomrt_ctx;

/* A kernel of the generated program (loomc --report lists the same ones):
 * the op, its source line, and the bytes it must read and write at least
 * once and its FLOPs per run, from which --profile computes the fraction of
 * the device's measured bandwidth or matrix throughput it achieves. */
typedef struct {
  const char *op;
  const char *at;
  double bytes;
  double flops;
} loomrt_kernel;

typedef struct {
  const char *name;   /* the model's name */
  const char *source; /* the .loom file it was compiled from */
  int num_axes;
  const char *const *axis_names;
  const int64_t *axis_sizes;
  int num_params;
  const loomrt_tensor *params;
  int num_inputs;
  const loomrt_tensor *inputs;
  int num_outputs;
  const loomrt_tensor *outputs;
  int64_t arena_bytes;
  /* One step of the model: reads parameters and inputs from the arena and
   * leaves the outputs there. */
  void (*step)(loomrt_ctx *rt, char *arena);
  int num_kernels;
  const loomrt_kernel *kernels;
} loomrt_model;

/* Bracket kernel `kernel` of the model's table in the step; they time it
 * under --profile and cost a branch otherwise. */
void loomrt_kernel_begin(loomrt_ctx *rt, int kernel);
void loomrt_kernel_end(loomrt_ctx *rt, int kernel);

/* The CUDA backend's stream for this rank (a cudaStream_t). */
void *loomrt_stream(loomrt_ctx *rt);

/* Runs the model with the executable's options (--help lists them): one
 * rank per process under mpirun, or every rank as a thread of this process
 * with --loopback. Returns the process exit code. */
int loomrt_main(int argc, char **argv, const loomrt_model *model);

/* This rank's index in the group over `axes` (row-major, in the order given). */
int64_t loomrt_group_rank(loomrt_ctx *rt, const int *axes, int num_axes);

/* Ends the job: prints "loom: rank R: error: <site>: <message>" and aborts
 * every rank with a non-zero exit. */
void loomrt_fail(loomrt_ctx *rt, const char *site, const char *message);

/*--- Collectives -----------------------------------------------------------
 * `site` names the op and its source line for error messages. Groups are
 * the ranks sharing their coordinates on every axis but `axes`; ranks in a
 * group are numbered row-major over `axes` in the order given. A tensor cut
 * along dimension d is described as [outer, d, inner] with `chunk` = d*inner
 * elements of the local piece. `in` and `out` may be the same buffer only
 * for all_reduce and broadcast. */
void loomrt_all_reduce(loomrt_ctx *rt, const char *site, const int *axes, int num_axes,
                       int dtype, int reduction, const void *in, void *out, int64_t count);
void loomrt_all_gather(loomrt_ctx *rt, const char *site, const int *axes, int num_axes,
                       int dtype, const void *in, void *out, int64_t outer, int64_t chunk);
void loomrt_reduce_scatter(loomrt_ctx *rt, const char *site, const int *axes, int num_axes,
                           int dtype, int reduction, const void *in, void *out,
                           int64_t outer, int64_t chunk);
/* Several all_gathers, all_reduces or reduce_scatters of one kind, group
 * and reduction (loom.combined) as one collective: each member's buffers,
 * dtype and layout are those its own call takes (an all_reduce's
 * [outer, chunk] is [1, count]; `in` and `out` may be one buffer only for
 * all_reduce). A reduction's members have one dtype; a gather's may
 * differ. The members' pieces are packed into one buffer first, so every
 * input is read before any output is written. */
enum {
  LOOMRT_ALL_GATHER = 0,
  LOOMRT_ALL_REDUCE = 1,
  LOOMRT_REDUCE_SCATTER = 2
};
typedef struct {
  const void *in;
  void *out;
  int dtype;
  int64_t outer, chunk;
} loomrt_member;
void loomrt_combined(loomrt_ctx *rt, const char *site, int kind,
                     const int *axes, int num_axes, int reduction,
                     const loomrt_member *members, int num_members);

/// Asynchronous collectives (loom.start, loom.wait). The all_reduce,
/// all_gather, reduce_scatter and combined calls between
/// loomrt_start_begin(future) and loomrt_start_end(future) start and may
/// still run when they return; loomrt_wait(future) waits for them, and
/// then their outputs hold their results. Until then their inputs must not
/// change and their outputs must not be read. Futures are numbered from 0
/// by the program; each is waited for once, within the step.
void loomrt_start_begin(loomrt_ctx *rt, int future);
void loomrt_start_end(loomrt_ctx *rt, int future);
void loomrt_wait(loomrt_ctx *rt, int future);
void loomrt_all_slice(loomrt_ctx *rt, const int *axes, int num_axes, int dtype,
                      const void *in, void *out, int64_t outer, int64_t chunk);
/* Splits dimension split_dim of the local [shape] into n pieces, sends piece
 * r to group rank r and concatenates the received pieces along concat_dim.
 * With split_axes (num_axes of them, the axes in another order; NULL: in
 * the order of axes), the pieces are numbered over split_axes: group rank
 * q receives the piece its coordinates index in that order. */
void loomrt_all_to_all(loomrt_ctx *rt, const char *site, const int *axes,
                       int num_axes, int dtype, const void *in, void *out,
                       int rank, const int64_t *shape, int split_dim,
                       int concat_dim, const int *split_axes);
/* pairs: num_pairs (source, target) group ranks; a rank that is no target
 * gets zeros. */
void loomrt_collective_permute(loomrt_ctx *rt, const char *site, const int *axes,
                               int num_axes, int dtype, const void *in, void *out,
                               int64_t count, const int64_t *pairs, int num_pairs);
void loomrt_broadcast(loomrt_ctx *rt, const char *site, const int *axes, int num_axes,
                      int dtype, const void *in, void *out, int64_t count, int64_t root);
void loomrt_send(loomrt_ctx *rt, const char *site, int axis, int64_t offset, int dtype,
                 const void *in, int64_t count);
void loomrt_recv(loomrt_ctx *rt, const char *site, int axis, int64_t offset, int dtype,
                 void *out, int64_t count);

/*--- Memory ----------------------------------------------------------------
 * Pointers into the arena are device pointers for a device backend. */

/* dst <- src within the arena (the ranges may overlap). */
void loomrt_copy(loomrt_ctx *rt, void *dst, const void *src, int64_t bytes);
/* dst (arena) <- src (host memory, free to reuse when this returns). */
void loomrt_upload(loomrt_ctx *rt, void *dst, const void *src, int64_t bytes);
/* dst (arena) <- src, a constant of the program (static data that never
 * changes, so a device backend may keep its own copy). */
void loomrt_constant(loomrt_ctx *rt, void *dst, const void *src, int64_t bytes);
/* dst (host memory) <- src (arena), once the rank's earlier work is done. */
void loomrt_download(loomrt_ctx *rt, void *dst, const void *src, int64_t bytes);

/*--- Kernels ---------------------------------------------------------------
 * Floating inputs are widened to f32, computed in f32 and rounded once to
 * the output's type (docs/language.md, 11.2). */

/* A strided view of a contraction operand or result; dims are grouped as the
 * contraction says (batch, then M or N, then K). */
typedef struct {
  int num_dims;
  int64_t size[2 * LOOMRT_MAX_RANK];
  int64_t stride[2 * LOOMRT_MAX_RANK]; /* in elements; 0 broadcasts */
} loomrt_view;

/* out[b, m, n] = sum over k (and over a_sum / b_sum) of a[b, m, k] * b[b, k, n].
 * b may be null for a one-operand einsum: a scalar 1 (b views are empty). 
 * a: dims [batch..., m..., k...] (+ a_sum); b: [batch..., k..., n...]
 * (+ b_sum); out: [batch..., m..., n...]. */
typedef struct {
  int num_batch, num_m, num_n, num_k;
  int a_dtype, b_dtype, out_dtype;
  loomrt_view a, a_sum, b, b_sum, out;
} loomrt_contraction;

void loomrt_contract(loomrt_ctx *rt, const loomrt_contraction *c, const void *a,
                     const void *b, void *out);

/* A product whose one reader applies, with `bias` a vector of `bias_count`
 * elements of the product's type along its last dimension:
 *   LOOMRT_EPILOGUE_BIAS_GELU_TANH: gelu(product + bias, approximate = "tanh");
 *   LOOMRT_EPILOGUE_BIAS_RESIDUAL: product + bias + residual (the residual
 *   laid out as the product).
 * Where the backend runs that in the GEMM's epilogue (cuBLASLt's GELU_BIAS,
 * or its BIAS with the residual as C, on the CUDA backend with
 * LOOMRT_GEMM_EPILOGUE=1, when its plan allows) it writes `out` and returns
 * 1: the sums and the GELU are then in f32, rounded once at the end.
 * Otherwise it runs loomrt_contract(c, a, b, product) and returns 0, and the
 * caller applies the rest itself (rounding at each op). */
#define LOOMRT_EPILOGUE_BIAS_GELU_TANH 1
#define LOOMRT_EPILOGUE_BIAS_RESIDUAL 2
int loomrt_contract_epilogue(loomrt_ctx *rt, const loomrt_contraction *c,
                             const void *a, const void *b, void *product,
                             int epilogue, const void *bias, int64_t bias_count,
                             const void *residual, void *out);

/* Where row r of a row kernel's input starts, in elements:
 * (r / group) * group_stride + (r % group) * row_stride, so that a strided
 * piece of another value (q's heads in a fused projection) is read in
 * place; a row's elements are contiguous. */
typedef struct {
  int64_t group, group_stride, row_stride;
} loomrt_rows;
/* Reduces the dimensions set in `mask` of in[shape] (sum, max; a mean is a
 * sum times `scale`). With in_rows (a reduction of the last dimension
 * only), in's rows where it says; null: in is row-major. */
void loomrt_reduce(int dtype, int reduction, const void *in, void *out,
                   int rank, const int64_t *shape, uint32_t mask, double scale,
                   const loomrt_rows *in_rows);
/* Softmax over the middle dimension of [outer, n, inner]; with in_rows
 * (inner 1 only), in's rows where it says, out's one after another. */
void loomrt_softmax(int dtype, const void *in, void *out, int64_t outer, int64_t n,
                    int64_t inner, const loomrt_rows *in_rows);
/* Over each of `rows` rows of n elements: max[r] = the row's maximum and
 * sum[r] = the sum of exp(x - max[r]), in f32 (loom.softmax_stats), reading
 * the row once. A row of -inf has sum NaN, or 0 when `partial` (a piece of
 * a row split over ranks). */
void loomrt_softmax_stats(int dtype, const void *in, void *max, void *sum,
                          int64_t rows, int64_t n, int partial);
/* Layer norm (or RMS norm when bias is null and rms is set) over the last n
 * elements of each of `rows` rows; x's rows where x_rows says (null: one
 * after another), out's one after another. */
void loomrt_norm(int dtype, const void *x, int scale_dtype, const void *scale,
                 const void *bias, void *out, int64_t rows, int64_t n,
                 double eps, int rms, const loomrt_rows *x_rows);
/* sum = a + b (rows x n elements of dtype, rounded to it), then out = the
 * loomrt_norm of sum, reading a and b once (loom.add_norm). With b_bias
 * (n elements of dtype, or null), the second addend is b + b_bias, rounded
 * to dtype first. */
void loomrt_add_norm(int dtype, const void *a, const void *b,
                     const void *b_bias, void *sum, int scale_dtype, const void *scale, const void *bias,
                     void *out, int64_t rows, int64_t n, double eps, int rms);
/* Attention over `outer` x `inner` batch entries: q [s, e], k [t, e] and
 * v [t, f] read and out [s, f] written per entry, each through its strides
 * (strides[0..3]: elements between batch entries of the outer and inner
 * dimensions and between rows; columns are contiguous), so that q, k and v
 * may be head-split views of projections laid out [b, s, h, e] and out may
 * be laid out [b, s, h, f] for the out-projection. */
typedef struct {
  int64_t outer, inner, row;
} loomrt_attention_strides;
void loomrt_attention(int dtype, const void *q, const void *k, const void *v, void *out,
                      int64_t outer, int64_t inner, int64_t s, int64_t t, int64_t e,
                      int64_t f, const loomrt_attention_strides strides[4], int causal,
                      double scale);
/* out[i, :] = table[ids[i] - vocab_start, :] when that row is this rank's,
 * zeros otherwise. */
void loomrt_embedding(int ids_dtype, const void *ids, int64_t count, int dtype,
                      const void *table, int64_t rows, int64_t width, int64_t vocab_start,
                      void *out);
/* out[i] = f32(logits[i, targets[i] - vocab_start]) or 0 when not this rank's;
 * a target outside [0, vocab_total) (the whole vocabulary) ends the job. */
void loomrt_pick(loomrt_ctx *rt, const char *site, int dtype, const void *logits,
                 int64_t count, int64_t vocab, int targets_dtype, const void *targets,
                 int64_t vocab_start, int64_t vocab_total, float *out);
/* loom.logits_stats: with logits the result of the product `c` ([rows...,
 * vocab], never stored whole: made a block of columns at a time),
 * max and sum as loomrt_softmax_stats (partial or not) and picked as
 * loomrt_pick over the logits. */
void loomrt_logits_stats(loomrt_ctx *rt, const char *site, const loomrt_contraction *c,
                         const void *a, const void *b, int targets_dtype,
                         const void *targets, int64_t vocab_start, int64_t vocab_total,
                         int partial, float *max, float *sum, float *picked);
/* Mean over `count` rows of logsumexp(logits[i, :]) - logits[i, targets[i]]. */
void loomrt_cross_entropy(loomrt_ctx *rt, const char *site, int dtype, const void *logits,
                          int64_t count, int64_t vocab, int targets_dtype,
                          const void *targets, float *out);
void loomrt_transpose(int dtype, const void *in, void *out, int rank, const int64_t *shape,
                      const int *perm);
/* Copies in[outer, in_dim, inner][:, start:start+out_dim, :] to out (extract)
 * or in to out[:, start:start+in_dim, :] (insert). */
/* out = in[start[0]:start[0]+out_shape[0], ...] of in[in_shape]. */
void loomrt_slice(int dtype, const void *in, void *out, int rank, const int64_t *in_shape,
                  const int64_t *start, const int64_t *out_shape);
void loomrt_extract(int dtype, const void *in, void *out, int64_t outer, int64_t in_dim,
                    int64_t out_dim, int64_t start, int64_t inner);
void loomrt_insert(int dtype, const void *in, void *out, int64_t outer, int64_t in_dim,
                   int64_t out_dim, int64_t start, int64_t inner);
/* out[sum_d i[d] * out_strides[d]] = in[sum_d i[d] * in_strides[d]] for every
 * index i of `shape` (element strides): a strided piece of one value copied
 * into its place in a concatenation. */
void loomrt_copy_strided(int dtype, const void *in, void *out, int rank,
                         const int64_t *shape, const int64_t *in_strides,
                         const int64_t *out_strides);

/*--- bf16 and f16 storage types: exact widening, round to nearest even ----*/
#ifdef __CUDACC__
#define LOOMRT_INLINE static inline __host__ __device__
#else
#define LOOMRT_INLINE static inline
#endif

/*--- loomrt_rows --------------------------------------------------------*/
/* Rows one after another, n elements each. */
LOOMRT_INLINE loomrt_rows loomrt_consecutive_rows(int64_t rows, int64_t n) {
  loomrt_rows result = {rows > 0 ? rows : 1, (rows > 0 ? rows : 1) * n, n};
  return result;
}
/* The element where row r starts (no division within the first group,
 * which holds every row of consecutive ones). */
LOOMRT_INLINE int64_t loomrt_row_start(loomrt_rows rows, int64_t r) {
  if (r < rows.group)
    return r * rows.row_stride;
  return (r / rows.group) * rows.group_stride +
         (r % rows.group) * rows.row_stride;
}
LOOMRT_INLINE float loomrt_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}
LOOMRT_INLINE uint16_t loomrt_f32_to_bf16(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  /* One cvt.rn.bf16.f32 where the rounding below takes about eight
     instructions (a fused GELU kernel rounds three times an element): the
     same bits for every input but a NaN, which stays a NaN. */
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  uint32_t bits;
  memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((bits >> 16) | 0x40u); /* quiet NaN */
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
#endif
}
LOOMRT_INLINE float loomrt_f16_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  /* One exact cvt.f32.f16 where the widening below branches on subnormals:
     the same bits for every input but a NaN, which stays a NaN. */
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu,
           mantissa = h & 0x3ffu, bits;
  if (exponent == 0x1fu) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else { /* subnormal: normalise */
    exponent = 113u;
    while (!(mantissa & 0x400u)) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
#endif
}
LOOMRT_INLINE uint16_t loomrt_f32_to_f16(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  /* One cvt.rn.f16.f32 (to nearest, ties to even, subnormals kept,
     overflow to infinity) where the rounding below takes about a dozen
     instructions and a branch: the same bits for every input but a NaN,
     which stays a NaN. */
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  uint32_t bits;
  memcpy(&bits, &f, 4);
  uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)
    return (uint16_t)(sign | 0x7e00u);
  if (magnitude >= 0x477ff000u) /* rounds to >= 65520: infinity */
    return (uint16_t)(sign | 0x7c00u);
  if (magnitude < 0x38800000u) { /* below the smallest normal f16 */
    /* Adding 0.5 (as f32) aligns the f16 subnormal grid with f32's last
     * mantissa bits, so the FPU rounds to nearest even for us. */
    float shifted;
    memcpy(&shifted, &magnitude, 4);
    shifted += 0.5f;
    uint32_t out;
    memcpy(&out, &shifted, 4);
    return (uint16_t)(sign | (uint16_t)(out - 0x3f000000u));
  }
  uint32_t odd = (magnitude >> 13) & 1u;
  magnitude += 0xc8000fffu + odd; /* rebias exponent (-112 << 23) and round */
  return (uint16_t)(sign | (uint16_t)(magnitude >> 13));
#endif
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LOOMRT_H */
