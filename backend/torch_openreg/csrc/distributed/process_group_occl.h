// process_group_occl.h - the "occl" torch.distributed backend: a c10d
// Backend whose collectives are OCCL calls on openreg device tensors. torch's
// ProcessGroup holds it for the openreg device type and hands it the calls
// whose tensors are on openreg devices.
//
// Each call runs on the current stream of its tensors' device, in order with
// the ops that produced them, and returns a Work completed through an
// orEvent_t recorded after it: wait() blocks on it, isCompleted() polls it.
// A call whose stream is drained when it returns (a small call OCCL ran on
// the calling thread) is complete at once, without an event.
// One OCCL communicator per device a group uses, made on first use; its
// unique id travels through the group's c10d store (rank 0 sets, the others
// get). docs/torch-distributed.md is the user's guide.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <occl.h>
#include <openreg.h>

namespace torch_openreg {

// One OCCL communicator: the group's ranks on one device index.
// Works hold it too: a work settled after the group shut down or aborted
// reads a null comm (under mutex) and says so.
struct OcclComm {
    std::mutex mutex;
    occlComm_t comm = nullptr;
    int device = -1;
    bool aborted = false;
    ~OcclComm();
    // Destroys the communicator (occlCommDestroy: its queued work finishes
    // first), or aborts it (occlCommAbort) when abort is set or it failed.
    void release(bool abort);
    // Empty if the communicator is sound, else why not.
    std::string failure(const char *name);
};

class ProcessGroupOCCL : public c10d::Backend {
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
        // given); rethrows OCCL's failure as a Python exception. Under
        // TORCH_OCCL_BLOCKING_WAIT=0 and without a timeout, as NCCL's: the
        // current stream waits for the work, the host does not.
        bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
        // The outputs are written on the current stream already: nothing to do.
        void synchronize() override;
        std::vector<at::Tensor> result() override;
        c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
        // A recvAnysource's sender, once it has completed (dist.recv with no
        // src returns it).
        int sourceRank() const override;

      private:
        friend class ProcessGroupOCCL;
        // Completes the work if its event has; block says whether to wait.
        // Returns whether it is complete. Safe to call from several threads.
        bool settle(bool block);
        // Completes the work: e is how waiting for it ended; the
        // communicator's state says whether it failed.
        void complete(orError_t e);
        // Completes future_ as the work completed (under settle_mutex_).
        void complete_future();
        // Records the work's event (made on first use) on stream, after the
        // call: a coalesced call's at the end of the coalescing.
        void recorded(orStream_t stream);
        // Completes it failed, without an event (its coalescing was dropped).
        void drop(const std::string &why);
        // wait()'s stream side: the current stream waits for the event;
        // false if there is no event yet.
        bool stream_wait();

        const char *name_;
        std::shared_ptr<OcclComm> comm_;
        std::vector<at::Tensor> outputs_;
        std::vector<at::Tensor> keep_alive_; // inputs and staging buffers in use
        std::chrono::milliseconds timeout_;
        // recvAnysource: OCCL writes the sender's rank here when the receive
        // has found it (the work outlives the receive: the watcher holds it
        // until its event, recorded after the receive, has completed).
        std::shared_ptr<int> source_;
        // None for a call complete when it returned (see run()).
        orEvent_t event_ = nullptr;
        // Made by getFuture() (under settle_mutex_).
        c10::intrusive_ptr<c10::ivalue::Future> future_;
        std::mutex settle_mutex_; // held while completing, never while waiting
        std::atomic<bool> settled_{false};
        // False while its coalescing is open. Atomic: stream_wait() reads it
        // without settle_mutex_, which the watcher holds while it blocks.
        std::atomic<bool> recorded_{true};
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
    // torch's coalescing manager and FSDP: one _allgather_base per pair,
    // launched together (occlGroupStart/End); one work for them all.
    c10::intrusive_ptr<c10d::Work>
    allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                    std::vector<at::Tensor> &inputs,
                                    const c10d::AllgatherOptions &opts) override;
    // dist.all_gather_coalesced: outputs[r][i] gets rank r's input i (of
    // any sizes and dtypes); one occlAllGather per input, launched together.
    c10::intrusive_ptr<c10d::Work>
    allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                        std::vector<at::Tensor> &inputs,
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
    // The same for _reduce_scatter_base.
    c10::intrusive_ptr<c10d::Work>
    reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                    std::vector<at::Tensor> &inputs,
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
    // dist.recv / irecv without src: occlRecvAnySource, which takes the
    // first send that reaches this rank from any rank of the group. Its wait()
    // blocks the host (the sender's rank is wanted at once).
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
                                                 int tag) override;
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;
    // dist.monitored_barrier is gloo's alone in torch (its Python checks the
    // group's backend): this one is reached through the backend object. Every
    // rank checks in through the store; rank 0 waits for each within the
    // timeout and names the ranks that did not come (all of them with
    // wait_all_ranks), then releases the others.
    void monitoredBarrier(const c10d::BarrierOptions &opts, bool wait_all_ranks) override;

    // split_group (and DeviceMesh, which uses it once the default group is
    // bound to a device): occlCommSplit of this group's communicator on its
    // bound device (else the last it used, else the current one). Every rank
    // of this group calls it; those not in ranks (ranks of this group, sorted)
    // split with OCCL_SPLIT_NOCOLOR and get nullptr.
    bool supportsSplitting() const override { return true; }
    c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store> &store,
                                            const std::vector<int> &ranks,
                                            const c10::intrusive_ptr<Options> &opts) override;
    // init_process_group(device_id=...) and new_group on a bound default
    // group: the communicator of that device is made now.
    void eagerConnectSingleDevice(at::Device device) override;

    // dist._coalescing_manager (and batch_isend_irecv): the calls between
    // start and end, made by this thread on one device, are launched together
    // by occlGroupEnd. The calls return no work (None, as NCCL's); the
    // end's work covers them all.
    bool supportsCoalescing() const override { return true; }
    void startCoalescing() override;
    c10::intrusive_ptr<c10d::Work> endCoalescing() override;

    // The number of calls made on the group (a coalesced group counts as its
    // calls), the same on every rank of a group that runs the same calls.
    // set starts it at 0, as NCCL's.
    void setSequenceNumberForGroup() override;
    uint64_t getSequenceNumberForGroup() override;

    // The options it was made with: the name and the timeout.
    c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;
    // dist.destroy_process_group() (and the exit hook of
    // torch_openreg.distributed): the works in flight finish, then the
    // communicators are destroyed. Later calls raise.
    void shutdown() override;
    // The communicators are aborted (the works in flight fail), then as shutdown.
    void abort() override;

    std::chrono::milliseconds timeout() const { return timeout_; }

    // Every group alive in the process, for the exit hook: shut down while
    // the openreg runtime still runs (torch's static destructors run after it
    // has stopped).
    static void track(const c10::intrusive_ptr<ProcessGroupOCCL> &group);
    static void shutdown_all();

  private:
    // What a collective enqueues, given the communicator and the stream.
    using Launch = std::function<occlResult_t(occlComm_t, orStream_t)>;

    std::shared_ptr<OcclComm> comm_for(int device);
    // The device split, eager connect and barrier default to.
    int default_device();
    c10::intrusive_ptr<c10d::Work> bitwise_allreduce(const at::Tensor &t,
                                                     c10d::ReduceOp::RedOpType kind);
    c10::intrusive_ptr<c10d::Work> run(const char *name, c10d::OpType type,
                                       const at::Device &device, std::vector<at::Tensor> outputs,
                                       std::vector<at::Tensor> keep_alive, const Launch &launch,
                                       const std::function<void()> &after = nullptr);
    void watch();
    // Lets the watcher finish the works in flight and joins it.
    void stop_watcher();
    void close(bool abort);

    c10::intrusive_ptr<c10d::Store> store_;
    std::chrono::milliseconds timeout_;
    std::mutex mutex_; // one caller at a time: autograd threads call too (DDP)
    std::map<int, std::shared_ptr<OcclComm>> comms_;
    uint64_t comms_made_ = 0;
    int last_device_ = -1;
    bool closed_ = false; // shut down or aborted: no more calls
    uint64_t seq_ = 0;
    uint64_t monitored_barriers_ = 0;

    // Coalescing: the group of OCCL calls opens at the first call (after its
    // communicator exists: an occlCommInitRank inside a group would wait for
    // the group's end). Works and copy-outs wait for the end.
    bool coalescing_ = false;
    bool group_open_ = false;
    int coalesce_device_ = -1;
    std::thread::id coalesce_thread_;
    std::vector<c10::intrusive_ptr<WorkOCCL>> coalesced_;
    std::vector<std::function<void()>> coalesced_after_;
    // The coalescing state is dropped (a failed call ends it, its group
    // closed without running).
    void abandon_coalescing();

    // Works in flight, completed in order by the watcher thread, so that
    // futures (DDP's) complete without anyone waiting on the work.
    std::mutex queue_mutex_;
    std::condition_variable queue_cv_;
    std::deque<c10::intrusive_ptr<WorkOCCL>> queue_;
    bool stopping_ = false;
    std::thread watcher_;
};

} // namespace torch_openreg
