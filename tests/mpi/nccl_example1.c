/*
 * NCCL's documented "Example 1: Single Process, Single Thread, Multiple
 * Devices", ported by renaming only (cuda -> or, nccl -> occl); the lines
 * marked "added:" check the result. Needs OPENREG_DEVICES=4.
 */
#include <stdlib.h>
#include <stdio.h>
#include "openreg.h"
#include "occl.h"
#include "nccl_check.h" /* added: */

#define CUDACHECK(cmd) do {                         \
  orError_t err = cmd;                              \
  if (err != orSuccess) {                           \
    printf("Failed: Cuda error %s:%d '%s'\n",       \
        __FILE__,__LINE__,orGetErrorString(err));   \
    exit(EXIT_FAILURE);                             \
  }                                                 \
} while(0)


#define NCCLCHECK(cmd) do {                         \
  occlResult_t res = cmd;                           \
  if (res != occlSuccess) {                         \
    printf("Failed, NCCL error %s:%d '%s'\n",       \
        __FILE__,__LINE__,occlGetErrorString(res)); \
    exit(EXIT_FAILURE);                             \
  }                                                 \
} while(0)


int main(int argc, char* argv[])
{
  occlComm_t comms[4];


  //managing 4 devices
  int nDev = 4;
  int size = 32*1024*1024;
  int devs[4] = { 0, 1, 2, 3 };


  //allocating and initializing device buffers
  float** sendbuff = (float**)malloc(nDev * sizeof(float*));
  float** recvbuff = (float**)malloc(nDev * sizeof(float*));
  orStream_t* s = (orStream_t*)malloc(sizeof(orStream_t)*nDev);


  for (int i = 0; i < nDev; ++i) {
    CUDACHECK(orSetDevice(i));
    CUDACHECK(orMalloc((void**)sendbuff + i, size * sizeof(float)));
    CUDACHECK(orMalloc((void**)recvbuff + i, size * sizeof(float)));
    CUDACHECK(orMemset(sendbuff[i], 1, size * sizeof(float)));
    CUDACHECK(orMemset(recvbuff[i], 0, size * sizeof(float)));
    CUDACHECK(orStreamCreate(s+i));
  }


  //initializing NCCL
  NCCLCHECK(occlCommInitAll(comms, nDev, devs));


   //calling NCCL communication API. Group API is required when using
   //multiple devices per thread
  NCCLCHECK(occlGroupStart());
  for (int i = 0; i < nDev; ++i)
    NCCLCHECK(occlAllReduce((const void*)sendbuff[i], (void*)recvbuff[i], size, occlFloat, occlSum,
        comms[i], s[i]));
  NCCLCHECK(occlGroupEnd());


  //synchronizing on CUDA streams to wait for completion of NCCL operation
  for (int i = 0; i < nDev; ++i) {
    CUDACHECK(orSetDevice(i));
    CUDACHECK(orStreamSynchronize(s[i]));
  }

  int wrong = 0; /* added: */
  for (int i = 0; i < nDev; ++i) /* added: */
    wrong |= nccl_check_result("example 1", recvbuff[i], size, nDev * nccl_check_memset1()); /* added: */

  //free device buffers
  for (int i = 0; i < nDev; ++i) {
    CUDACHECK(orSetDevice(i));
    CUDACHECK(orFree(sendbuff[i]));
    CUDACHECK(orFree(recvbuff[i]));
  }


  //finalizing NCCL
  for(int i = 0; i < nDev; ++i)
      occlCommDestroy(comms[i]);


  free(sendbuff); free(recvbuff); free(s); /* added: NCCL's example leaks them (LeakSanitizer) */
  if (wrong) return EXIT_FAILURE; /* added: */
  printf("Success \n");
  return 0;
}
