// process_group_occl.h - the "occl" torch.distributed backend: a c10d
// ProcessGroup whose collectives are OCCL calls on openreg device tensors.
//
// Each call runs on the current stream of its tensors' device, in order with
// the ops that produced them, and returns a Work completed through an
// orEvent_t recorded after it: wait() blocks on it, isCompleted() polls it.
// One OCCL communicator per device a group uses, made on first use; its
// unique id travels through the group's c10d store (rank 0 sets, the others
// get). docs/torch-distributed.md is the user's guide.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <occl.h>
#include <openreg.h>

namespace torch_openreg {

// One OCCL communicator: the group's ranks on one device index.
struct OcclComm {
    occlComm_t comm = nullptr;
    int device = -1;
    ~OcclComm();
};

class ProcessGroupOCCL : public c10d::ProcessGroup {
  public:
    class WorkOCCL : public c10d::Work {
      public:
        WorkOCCL(int rank, c10d::OpType type, const char *name,
                 std::shared_ptr<OcclComm> comm, std::vector<at::Tensor> outputs,
                 std::vector<at::Tensor> keep_alive, std::chrono::milliseconds timeout);
        ~WorkOCCL() override;

        // Non-blocking: true once the event recorded after the call has
        // completed (and then the call's outcome is known).
        bool isCompleted() override;
        bool isSuccess() const override;
        // Blocks until completion or the timeout (the group's when none is
        // given); rethrows OCCL's failure as a Python exception.
        bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
        // The outputs are written on the current stream already: nothing to do.
        void synchronize() override;
        std::vector<at::Tensor> result() override;
        c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

      private:
        friend class ProcessGroupOCCL;
        // Completes the work if its event has; block says whether to wait.
        // Returns whether it is complete. Safe to call from several threads.
        bool settle(bool block);

        const char *name_;
        std::shared_ptr<OcclComm> comm_;
        std::vector<at::Tensor> outputs_;
        std::vector<at::Tensor> keep_alive_; // inputs and staging buffers in use
        std::chrono::milliseconds timeout_;
        orEvent_t event_ = nullptr;
        c10::intrusive_ptr<c10::ivalue::Future> future_;
        std::mutex settle_mutex_;
        bool settled_ = false;
    };

    ProcessGroupOCCL(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                     std::chrono::milliseconds timeout);
    ~ProcessGroupOCCL() override;

    const std::string getBackendName() const override { return "occl"; }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                             const c10d::BroadcastOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                             const c10d::AllreduceOptions &opts) override;
    c10::intrusive_ptr<c10d::Work>
    allreduce_coalesced(std::vector<at::Tensor> &tensors,
                        const c10d::AllreduceCoalescedOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                          const c10d::ReduceOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                             std::vector<at::Tensor> &inputs,
                                             const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                   const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::GatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                           std::vector<std::vector<at::Tensor>> &inputs,
                                           const c10d::ScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work>
    reduce_scatter(std::vector<at::Tensor> &outputs, std::vector<std::vector<at::Tensor>> &inputs,
                   const c10d::ReduceScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work>
    _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                         const c10d::ReduceScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                                 std::vector<int64_t> &outputSplitSizes,
                                                 std::vector<int64_t> &inputSplitSizes,
                                                 const c10d::AllToAllOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                            std::vector<at::Tensor> &inputs,
                                            const c10d::AllToAllOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dstRank,
                                        int tag) override;
    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int srcRank,
                                        int tag) override;
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;

    std::chrono::milliseconds timeout() const { return timeout_; }

  private:
    // What a collective enqueues, given the communicator and the stream.
    using Launch = std::function<occlResult_t(occlComm_t, orStream_t)>;

    std::shared_ptr<OcclComm> comm_for(int device);
    c10::intrusive_ptr<c10d::Work> run(const char *name, c10d::OpType type,
                                       const at::Device &device, std::vector<at::Tensor> outputs,
                                       std::vector<at::Tensor> keep_alive, const Launch &launch,
                                       const std::function<void()> &after = nullptr);
    void watch();

    c10::intrusive_ptr<c10d::Store> store_;
    std::chrono::milliseconds timeout_;
    std::mutex mutex_; // one caller at a time: autograd threads call too (DDP)
    std::map<int, std::shared_ptr<OcclComm>> comms_;
    uint64_t comms_made_ = 0;
    int last_device_ = -1;

    // Works in flight, completed in order by the watcher thread, so that
    // futures (DDP's) complete without anyone waiting on the work.
    std::mutex queue_mutex_;
    std::condition_variable queue_cv_;
    std::deque<c10::intrusive_ptr<WorkOCCL>> queue_;
    bool stopping_ = false;
    std::thread watcher_;
};

} // namespace torch_openreg
