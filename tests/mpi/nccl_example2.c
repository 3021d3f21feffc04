/*
 * NCCL's documented "Example 2: One Device per Process or Thread", ported by
 * renaming only (cuda -> or, nccl -> occl): rank 0's occlGetUniqueId is its
 * first runtime call, made while the other ranks wait in MPI_Bcast, and a
 * plain MPI_Init starts MPI. The lines marked "added:" give the inputs values
 * (NCCL's example leaves them as cudaMalloc returns them) and check the result.
 */
#include <stdio.h>
#include "openreg.h"
#include "occl.h"
#include "mpi.h"
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include "nccl_check.h" /* added: */


#define MPICHECK(cmd) do {                          \
  int e = cmd;                                      \
  if( e != MPI_SUCCESS ) {                          \
    printf("Failed: MPI error %s:%d '%d'\n",        \
        __FILE__,__LINE__, e);   \
    exit(EXIT_FAILURE);                             \
  }                                                 \
} while(0)


#define CUDACHECK(cmd) do {                         \
  orError_t e = cmd;                                \
  if( e != orSuccess ) {                            \
    printf("Failed: Cuda error %s:%d '%s'\n",             \
        __FILE__,__LINE__,orGetErrorString(e));   \
    exit(EXIT_FAILURE);                             \
  }                                                 \
} while(0)


#define NCCLCHECK(cmd) do {                         \
  occlResult_t r = cmd;                             \
  if (r!= occlSuccess) {                            \
    printf("Failed, NCCL error %s:%d '%s'\n",             \
        __FILE__,__LINE__,occlGetErrorString(r));   \
    exit(EXIT_FAILURE);                             \
  }                                                 \
} while(0)


static uint64_t getHostHash(const char* string) {
  // Based on DJB2a, result = result * 33 ^ char
  uint64_t result = 5381;
  for (int c = 0; string[c] != '\0'; c++){
    result = ((result << 5) + result) ^ string[c];
  }
  return result;
}


static void getHostName(char* hostname, int maxlen) {
  gethostname(hostname, maxlen);
  for (int i=0; i< maxlen; i++) {
    if (hostname[i] == '.') {
        hostname[i] = '\0';
        return;
    }
  }
}


int main(int argc, char* argv[])
{
  int size = 32*1024*1024;


  int myRank, nRanks, localRank = 0;


  //initializing MPI
  MPICHECK(MPI_Init(&argc, &argv));
  MPICHECK(MPI_Comm_rank(MPI_COMM_WORLD, &myRank));
  MPICHECK(MPI_Comm_size(MPI_COMM_WORLD, &nRanks));


  //calculating localRank based on hostname which is used in selecting a GPU
  uint64_t hostHashs[nRanks];
  char hostname[1024];
  getHostName(hostname, 1024);
  hostHashs[myRank] = getHostHash(hostname);
  MPICHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, hostHashs, sizeof(uint64_t), MPI_BYTE, MPI_COMM_WORLD));
  for (int p=0; p<nRanks; p++) {
     if (p == myRank) break;
     if (hostHashs[p] == hostHashs[myRank]) localRank++;
  }


  occlUniqueId id;
  occlComm_t comm;
  float *sendbuff, *recvbuff;
  orStream_t s;


  //get NCCL unique ID at rank 0 and broadcast it to all others
  if (myRank == 0) occlGetUniqueId(&id);
  MPICHECK(MPI_Bcast((void *)&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD));


  //picking a GPU based on localRank, allocate device buffers
  CUDACHECK(orSetDevice(localRank));
  CUDACHECK(orMalloc((void**)&sendbuff, size * sizeof(float)));
  CUDACHECK(orMalloc((void**)&recvbuff, size * sizeof(float)));
  CUDACHECK(orStreamCreate(&s));


  //initializing NCCL
  NCCLCHECK(occlCommInitRank(&comm, nRanks, id, myRank));

  float *host = malloc(size * sizeof(float)); /* added: rank r gives r + 1 */
  for (int i = 0; i < size; i++) host[i] = (float)(myRank + 1); /* added: */
  CUDACHECK(orMemcpy(sendbuff, host, size * sizeof(float), orMemcpyHostToDevice)); /* added: */
  free(host); /* added: */

  //communicating using NCCL
  NCCLCHECK(occlAllReduce((const void*)sendbuff, (void*)recvbuff, size, occlFloat, occlSum,
        comm, s));


  //completing NCCL operation by synchronizing on the CUDA stream
  CUDACHECK(orStreamSynchronize(s));

  int wrong = nccl_check_result("example 2", recvbuff, size, /* added: */
                                nRanks * (nRanks + 1) / 2.0f); /* added: */

  //free device buffers
  CUDACHECK(orFree(sendbuff));
  CUDACHECK(orFree(recvbuff));


  //finalizing NCCL
  occlCommDestroy(comm);


  //finalizing MPI
  MPICHECK(MPI_Finalize());


  if (wrong) return EXIT_FAILURE; /* added: */
  printf("[MPI Rank %d] Success \n", myRank);
  return 0;
}
