//===- gemm_bound.c - The sgemm calls of one step, and nothing else -------===//
//
// The lower bound of a CPU step: replays the cblas_sgemm calls that the Loom
// runtime makes in one step (loomrt_contract: one per batch; loomrt_attention:
// q k^T and p v per batch), with f32 operands already in place, so no
// widening, packing, scattering, softmax or element-wise work. The calls come
// from a list that bench/cpu/run.py derives from `loomc --emit=cpu`:
//
//   repeat N                  the ops up to the matching `end` run N times
//   end
//   contract LABEL BATCH TA TB M N K LDA LDB APER BPER
//                             BATCH x cblas_sgemm(RowMajor, TA, TB, M, N, K,
//                             1, A, LDA, B, LDB, 0, C, N); TA, TB are N or T;
//                             APER/BPER = 1 when the operand is a different
//                             tensor in each repetition (a layer's weights)
//   attention LABEL BATCH S T E F SCALE
//                             per batch: sgemm(N, T, S, T, E, SCALE, q, E, k,
//                             E, 0, p, T) and sgemm(N, N, S, F, T, 1, p, T, v,
//                             F, 0, o, F)
//
// Lines starting with '#' are comments. Usage:
//   gemm_bound [--steps N] [--warmup N] LIST      (LIST may be '-' for stdin)
// Prints each op's median time per step and, as the bound, the sums of the
// ops' medians (contractions, attention GEMMs, total): steadier than the
// median of whole steps when other processes share the cores, since a short op
// is less often preempted than a whole step; the median step follows for
// comparison. BLAS runs on one thread.
//===----------------------------------------------------------------------===//
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kRepeat, kEnd, kContract, kAttention };

typedef struct {
  int kind;
  char label[128];
  long batch, m, n, k, lda, ldb; // contract; attention: m=S n=T k=E lda=F
  int transA, transB, aPerRep, bPerRep;
  double scale;
  long count;       // repeat: iterations
  long reps;        // product of the enclosing repeats
  float *a, *b, *c; // contract: A, B, C; attention: q, k, v
  float *p, *o;     // attention: scores and result (reused per batch)
  double *seconds;  // per step
} Op;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *buffer(size_t count) {
  float *data = aligned_alloc(64, (count * sizeof(float) + 63) / 64 * 64);
  if (!data) {
    fprintf(stderr, "gemm_bound: out of memory\n");
    exit(1);
  }
  // Small values: no overflow, no denormals, whatever the calls do.
  for (size_t i = 0; i < count; ++i)
    data[i] = (float)((i * 2654435761u) % 1000) * 1e-4f - 0.05f;
  return data;
}

static int compareDoubles(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static double median(double *values, long count) {
  qsort(values, (size_t)count, sizeof(double), compareDoubles);
  return values[count / 2];
}

static int parseTrans(const char *text, int *trans) {
  if (strcmp(text, "N") && strcmp(text, "T"))
    return 0;
  *trans = text[0] == 'T';
  return 1;
}

/// Parses LIST into ops; returns the number of ops, or -1 after printing why.
static long parse(FILE *file, Op **ops) {
  long capacity = 0, count = 0, depth = 0, reps[32] = {1};
  char line[1024];
  for (long number = 1; fgets(line, sizeof line, file); ++number) {
    char word[32] = "", ta[8], tb[8];
    if (sscanf(line, "%31s", word) != 1 || word[0] == '#')
      continue;
    if (count == capacity) {
      capacity = capacity ? 2 * capacity : 64;
      *ops = realloc(*ops, (size_t)capacity * sizeof(Op));
    }
    Op *op = &(*ops)[count];
    memset(op, 0, sizeof *op);
    int ok = 0;
    if (!strcmp(word, "repeat")) {
      op->kind = kRepeat;
      ok = sscanf(line, "%*s %ld", &op->count) == 1 && op->count > 0 && depth < 31;
      if (ok) {
        ++depth;
        reps[depth] = reps[depth - 1] * op->count;
      }
    } else if (!strcmp(word, "end")) {
      op->kind = kEnd;
      ok = depth-- > 0;
    } else if (!strcmp(word, "contract")) {
      op->kind = kContract;
      ok = sscanf(line, "%*s %127s %ld %7s %7s %ld %ld %ld %ld %ld %d %d", op->label,
                  &op->batch, ta, tb, &op->m, &op->n, &op->k, &op->lda, &op->ldb,
                  &op->aPerRep, &op->bPerRep) == 11 &&
           parseTrans(ta, &op->transA) && parseTrans(tb, &op->transB);
    } else if (!strcmp(word, "attention")) {
      op->kind = kAttention;
      ok = sscanf(line, "%*s %127s %ld %ld %ld %ld %ld %lf", op->label, &op->batch,
                  &op->m, &op->n, &op->k, &op->lda, &op->scale) == 7;
    }
    if (!ok) {
      fprintf(stderr, "gemm_bound: line %ld: cannot read '%s'\n", number, word);
      return -1;
    }
    op->reps = reps[depth > 0 && op->kind == kRepeat ? depth - 1 : depth];
    ++count;
  }
  if (depth != 0) {
    fprintf(stderr, "gemm_bound: %ld 'repeat' without 'end'\n", depth);
    return -1;
  }
  return count;
}

static void allocate(Op *op, long steps) {
  op->seconds = calloc((size_t)steps, sizeof(double));
  if (op->kind == kContract) {
    // A is M x K (K x M when transposed) per batch, with leading dimension
    // LDA; likewise B; C is dense M x N per batch.
    size_t a = (size_t)(op->batch * (op->transA ? op->k : op->m) * op->lda);
    size_t b = (size_t)(op->batch * (op->transB ? op->n : op->k) * op->ldb);
    op->a = buffer(a * (size_t)(op->aPerRep ? op->reps : 1));
    op->b = buffer(b * (size_t)(op->bPerRep ? op->reps : 1));
    op->c = buffer((size_t)(op->batch * op->m * op->n));
  } else if (op->kind == kAttention) {
    long s = op->m, t = op->n, e = op->k, f = op->lda;
    op->a = buffer((size_t)(op->batch * s * e));
    op->b = buffer((size_t)(op->batch * t * e));
    op->c = buffer((size_t)(op->batch * t * f));
    op->p = buffer((size_t)(s * t));
    op->o = buffer((size_t)(s * f));
  }
}

static void runContract(const Op *op, long rep) {
  size_t a = (size_t)((op->transA ? op->k : op->m) * op->lda);
  size_t b = (size_t)((op->transB ? op->n : op->k) * op->ldb);
  const float *aBase = op->a + (op->aPerRep ? (size_t)rep * a * (size_t)op->batch : 0);
  const float *bBase = op->b + (op->bPerRep ? (size_t)rep * b * (size_t)op->batch : 0);
  for (long i = 0; i < op->batch; ++i)
    cblas_sgemm(CblasRowMajor, op->transA ? CblasTrans : CblasNoTrans,
                op->transB ? CblasTrans : CblasNoTrans, (int)op->m, (int)op->n,
                (int)op->k, 1.0f, aBase + (size_t)i * a, (int)op->lda,
                bBase + (size_t)i * b, (int)op->ldb, 0.0f,
                op->c + (size_t)(i * op->m * op->n), (int)op->n);
}

static void runAttention(const Op *op) {
  long s = op->m, t = op->n, e = op->k, f = op->lda;
  for (long i = 0; i < op->batch; ++i) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s, (int)t, (int)e,
                (float)op->scale, op->a + i * s * e, (int)e, op->b + i * t * e, (int)e,
                0.0f, op->p, (int)t);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)s, (int)f, (int)t, 1.0f,
                op->p, (int)t, op->c + i * t * f, (int)f, 0.0f, op->o, (int)f);
  }
}

/// Runs ops [first, last) once per `count`, the body of a repeat; returns the
/// index after the matching end. `rep` numbers the enclosing iteration.
static long run(Op *ops, long first, long last, long step, long rep) {
  long i = first;
  while (i < last && ops[i].kind != kEnd) {
    Op *op = &ops[i];
    if (op->kind == kRepeat) {
      long next = i + 1;
      for (long r = 0; r < op->count; ++r)
        next = run(ops, i + 1, last, step, rep * op->count + r);
      i = next;
      continue;
    }
    double start = now();
    if (op->kind == kContract)
      runContract(op, rep);
    else
      runAttention(op);
    if (step >= 0)
      op->seconds[step] += now() - start;
    ++i;
  }
  return i + 1; // past the end (or the last op)
}

static double gflop(const Op *op) {
  double calls = (double)(op->batch * op->reps);
  if (op->kind == kContract)
    return 2e-9 * calls * (double)(op->m * op->n * op->k);
  return 2e-9 * calls * (double)(op->m * op->n * op->k + op->m * op->lda * op->n);
}

int main(int argc, char **argv) {
  long steps = 20, warmup = 3;
  const char *path = NULL;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--steps") && i + 1 < argc)
      steps = atol(argv[++i]);
    else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
      warmup = atol(argv[++i]);
    else if (!path && (argv[i][0] != '-' || !strcmp(argv[i], "-")))
      path = argv[i];
    else
      path = NULL, steps = 0;
  }
  if (!path || steps < 1 || warmup < 0) {
    fprintf(stderr, "usage: %s [--steps N] [--warmup N] LIST|-\n", argv[0]);
    return 2;
  }
  FILE *file = strcmp(path, "-") ? fopen(path, "r") : stdin;
  if (!file) {
    perror(path);
    return 2;
  }
  Op *ops = NULL;
  long count = parse(file, &ops);
  if (count < 0)
    return 2;
  openblas_set_num_threads(1);
  for (long i = 0; i < count; ++i)
    allocate(&ops[i], steps);

  double *total = calloc((size_t)steps, sizeof(double));
  double *contract = calloc((size_t)steps, sizeof(double));
  double *attention = calloc((size_t)steps, sizeof(double));
  for (long s = 0; s < warmup; ++s)
    run(ops, 0, count, -1, 0);
  for (long s = 0; s < steps; ++s) {
    double start = now();
    run(ops, 0, count, s, 0);
    total[s] = now() - start;
    for (long i = 0; i < count; ++i)
      (ops[i].kind == kContract ? contract : attention)[s] += ops[i].seconds[s];
  }

  printf("openblas: %s (core %s), %d thread\n", openblas_get_config(),
         openblas_get_corename(), openblas_get_num_threads());
  printf("%-28s %9s %8s %10s %8s\n", "op", "sgemms", "GFLOP", "median ms", "GFLOP/s");
  double flop[2] = {0, 0}, ms[2] = {0, 0}; // contractions, attention
  for (long i = 0; i < count; ++i) {
    Op *op = &ops[i];
    if (op->kind != kContract && op->kind != kAttention)
      continue;
    long calls = op->batch * op->reps * (op->kind == kAttention ? 2 : 1);
    double opMs = 1e3 * median(op->seconds, steps);
    printf("%-28s %9ld %8.4f %10.3f %8.1f\n", op->label, calls, gflop(op), opMs,
           gflop(op) / opMs * 1e3);
    flop[op->kind == kAttention] += gflop(op);
    ms[op->kind == kAttention] += opMs;
  }
  printf("bound: contractions %.3f ms (%.3f GFLOP), attention %.3f ms (%.3f GFLOP), "
         "total %.3f ms (sums of the ops' medians)\n",
         ms[0], flop[0], ms[1], flop[1], ms[0] + ms[1]);
  printf("steps: median %.3f ms (contractions %.3f, attention %.3f) over %ld steps\n",
         1e3 * median(total, steps), 1e3 * median(contract, steps),
         1e3 * median(attention, steps), steps);
  return 0;
}
