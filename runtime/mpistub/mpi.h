/*===- mpi.h - A one-rank stand-in for MPI --------------------------------===*
 *
 * For machines without MPI (a GPU box with no Open MPI): libloomrt's process
 * code builds against this header instead and runs as a single rank. Every
 * collective over one rank is a copy. CMake uses it only when find_package(MPI)
 * fails; runs then need a mesh of one device.
 *===----------------------------------------------------------------------===*/
#ifndef LOOMRT_MPISTUB_MPI_H
#define LOOMRT_MPISTUB_MPI_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int MPI_Comm;
typedef int MPI_Op;
typedef int MPI_Datatype;
typedef int MPI_Request;
#define MPI_REQUEST_NULL 0
typedef int MPI_Errhandler;
typedef int MPI_Info;
typedef struct {
  int unused;
} MPI_Status;
typedef void MPI_User_function(void *, void *, int *, MPI_Datatype *);

#define MPI_SUCCESS 0
#define MPI_COMM_WORLD 0
#define MPI_ERRORS_RETURN 0
#define MPI_IN_PLACE ((void *)1)
#define MPI_STATUSES_IGNORE ((MPI_Status *)0)
#define MPI_STATUS_IGNORE ((MPI_Status *)0)
#define MPI_MAX_ERROR_STRING 64
#define MPI_OP_NULL 0
#define MPI_INFO_NULL 0
#define MPI_COMM_TYPE_SHARED 1
#define MPI_SUM 1
#define MPI_MAX 2
#define MPI_MIN 4
/* Datatypes are their sizes in bytes. */
#define MPI_BYTE 1
#define MPI_UINT16_T 2
#define MPI_FLOAT 4
#define MPI_INT 4
#define MPI_INT32_T 4
#define MPI_INT64_T 8
#define MPI_DOUBLE 8

static inline void loomStubCopy(const void *in, void *out, int count, MPI_Datatype type) {
  if (in != MPI_IN_PLACE && in != out)
    memmove(out, in, (size_t)count * (size_t)type);
}
static inline int MPI_Init(int *, char ***) { return 0; }
static inline int MPI_Finalize(void) { return 0; }
static inline int MPI_Initialized(int *flag) { *flag = 1; return 0; }
static inline int MPI_Finalized(int *flag) { *flag = 0; return 0; }
static inline int MPI_Comm_set_errhandler(MPI_Comm, MPI_Errhandler) { return 0; }
static inline int MPI_Comm_rank(MPI_Comm, int *rank) { *rank = 0; return 0; }
static inline int MPI_Comm_size(MPI_Comm, int *size) { *size = 1; return 0; }
static inline int MPI_Abort(MPI_Comm, int code) { exit(code); }
static inline int MPI_Error_string(int, char *text, int *length) {
  *length = snprintf(text, MPI_MAX_ERROR_STRING, "error");
  return 0;
}
static inline int MPI_Op_create(MPI_User_function *, int, MPI_Op *op) { *op = 3; return 0; }
static inline int MPI_Comm_split(MPI_Comm, int, int, MPI_Comm *out) { *out = 0; return 0; }
static inline int MPI_Comm_split_type(MPI_Comm, int, int, MPI_Info, MPI_Comm *out) {
  *out = 0;
  return 0;
}
static inline int MPI_Comm_free(MPI_Comm *) { return 0; }
static inline int MPI_Iallreduce(const void *in, void *out, int count, MPI_Datatype type, MPI_Op,
                                 MPI_Comm, MPI_Request *) {
  loomStubCopy(in, out, count, type);
  return 0;
}
static inline int MPI_Ireduce(const void *in, void *out, int count, MPI_Datatype type, MPI_Op,
                              int, MPI_Comm, MPI_Request *) {
  loomStubCopy(in, out, count, type);
  return 0;
}
static inline int MPI_Iallgather(const void *in, int count, MPI_Datatype type, void *out, int,
                                 MPI_Datatype, MPI_Comm, MPI_Request *) {
  loomStubCopy(in, out, count, type);
  return 0;
}
static inline int MPI_Ireduce_scatter_block(const void *in, void *out, int count,
                                            MPI_Datatype type, MPI_Op, MPI_Comm,
                                            MPI_Request *) {
  loomStubCopy(in, out, count, type);
  return 0;
}
static inline int MPI_Ialltoall(const void *in, int count, MPI_Datatype type, void *out, int,
                                MPI_Datatype, MPI_Comm, MPI_Request *) {
  loomStubCopy(in, out, count, type);
  return 0;
}
static inline int MPI_Ibcast(void *, int, MPI_Datatype, int, MPI_Comm, MPI_Request *) {
  return 0;
}
static inline int MPI_Ibarrier(MPI_Comm, MPI_Request *) { return 0; }
/* A rank's send to itself is received by the matching receive. */
static const void *loomStubPending = 0;
static inline int MPI_Isend(const void *in, int, MPI_Datatype, int, int, MPI_Comm,
                            MPI_Request *) {
  loomStubPending = in;
  return 0;
}
static inline int MPI_Irecv(void *out, int count, MPI_Datatype type, int, int, MPI_Comm,
                            MPI_Request *) {
  if (loomStubPending)
    loomStubCopy(loomStubPending, out, count, type);
  loomStubPending = 0;
  return 0;
}
static inline int MPI_Test(MPI_Request *, int *done, MPI_Status *) {
  *done = 1;
  return 0;
}
static inline int MPI_Testall(int, MPI_Request *, int *done, MPI_Status *) {
  *done = 1;
  return 0;
}

#endif /* LOOMRT_MPISTUB_MPI_H */
