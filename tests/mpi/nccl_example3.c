/*
 * NCCL's documented "Example 3: Multiple Devices per Thread", ported by
 * renaming only (cuda -> or, nccl -> occl). CUDA numbers a node's GPUs for
 * every process, so rank r on a host uses devices 2r and 2r+1: run it with
 * OPENREG_DEVICES set to twice the ranks per host. The lines marked "added:"
 * check the result.
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


  //calculating localRank which is used in selecting a GPU
  uint64_t hostHashs[nRanks];
  char hostname[1024];
  getHostName(hostname, 1024);
  hostHashs[myRank] = getHostHash(hostname);
  MPICHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, hostHashs, sizeof(uint64_t), MPI_BYTE, MPI_COMM_WORLD));
  for (int p=0; p<nRanks; p++) {
     if (p == myRank) break;
     if (hostHashs[p] == hostHashs[myRank]) localRank++;
  }


  //each process is using two GPUs
  int nDev = 2;


  float** sendbuff = (float**)malloc(nDev * sizeof(float*));
  float** recvbuff = (float**)malloc(nDev * sizeof(float*));
  orStream_t* s = (orStream_t*)malloc(sizeof(orStream_t)*nDev);


  //picking GPUs based on localRank
  for (int i = 0; i < nDev; ++i) {
    CUDACHECK(orSetDevice(localRank*nDev + i));
    CUDACHECK(orMalloc((void**)sendbuff + i, size * sizeof(float)));
    CUDACHECK(orMalloc((void**)recvbuff + i, size * sizeof(float)));
    CUDACHECK(orMemset(sendbuff[i], 1, size * sizeof(float)));
    CUDACHECK(orMemset(recvbuff[i], 0, size * sizeof(float)));
    CUDACHECK(orStreamCreate(s+i));
  }


  occlUniqueId id;
  occlComm_t comms[nDev];


  //generating NCCL unique ID at one process and broadcasting it to all
  if (myRank == 0) occlGetUniqueId(&id);
  MPICHECK(MPI_Bcast((void *)&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD));


  //initializing NCCL, group API is required around occlCommInitRank as it is
  //called across multiple GPUs in each thread/process
  NCCLCHECK(occlGroupStart());
  for (int i=0; i<nDev; i++) {
     CUDACHECK(orSetDevice(localRank*nDev + i));
     NCCLCHECK(occlCommInitRank(comms+i, nRanks*nDev, id, myRank*nDev + i));
  }
  NCCLCHECK(occlGroupEnd());


  //calling NCCL communication API. Group API is required when using
  //multiple devices per thread/process
  NCCLCHECK(occlGroupStart());
  for (int i=0; i<nDev; i++)
     NCCLCHECK(occlAllReduce((const void*)sendbuff[i], (void*)recvbuff[i], size, occlFloat, occlSum,
           comms[i], s[i]));
  NCCLCHECK(occlGroupEnd());


  //synchronizing on CUDA stream to complete NCCL communication
  for (int i=0; i<nDev; i++)
      CUDACHECK(orStreamSynchronize(s[i]));

  int wrong = 0; /* added: */
  for (int i = 0; i < nDev; i++) /* added: */
    wrong |= nccl_check_result("example 3", recvbuff[i], size, /* added: */
                               nRanks * nDev * nccl_check_memset1()); /* added: */

  //freeing device memory
  for (int i=0; i<nDev; i++) {
     CUDACHECK(orFree(sendbuff[i]));
     CUDACHECK(orFree(recvbuff[i]));
  }


  //finalizing NCCL
  for (int i=0; i<nDev; i++) {
     occlCommDestroy(comms[i]);
  }


  //finalizing MPI
  MPICHECK(MPI_Finalize());


  free(sendbuff); free(recvbuff); free(s); /* added: NCCL's example leaks them (LeakSanitizer) */
  if (wrong) return EXIT_FAILURE; /* added: */
  printf("[MPI Rank %d] Success \n", myRank);
  return 0;
}
