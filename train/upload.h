// Batches moved from the host to their device by the loader's thread without making anyone wait:
// every tensor of a prepared batch (built on the host) packed into one pinned staging buffer (the
// pinned-memory cache reuses it once its copy is done), one non-blocking copy to one device buffer
// on a stream of the loader's own, the batch's tensors replaced by views of that buffer, and an
// event recorded after the copy. The step's stream waits for that event (on the device, not the
// host) and marks the buffer as its own (record_stream), so that its memory is not handed out
// again while the step still reads it. Device-generic (LibTorch's stream and event API): on a CPU
// device nothing moves.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace ddgnn {

struct PreparedBatch;

// Where each tensor of a packed batch lies in its byte buffer.
struct PackedLayout {
  struct Piece {
    int64_t offset = 0;  // bytes, a multiple of kAlign
    c10::ScalarType dtype = c10::ScalarType::Byte;
    std::vector<int64_t> shape;
  };
  static constexpr int64_t kAlign = 64;
  std::vector<Piece> pieces;  // in the order of batch_tensors()
  int64_t bytes = 0;
  bool operator==(const PackedLayout& o) const;
};

// The tensors of `p` that move, in a fixed order: the GraphBatch's (its segment maps' too), the
// column targets, the shares; undefined ones are left out.
std::vector<at::Tensor*> batch_tensors(PreparedBatch& p);

// Packs `tensors` (on the host) into `buffer` (kByte, on the host, at least layout.bytes long).
PackedLayout pack_layout(const std::vector<at::Tensor*>& tensors);
void pack(const std::vector<at::Tensor*>& tensors, const PackedLayout& layout,
          const at::Tensor& buffer);
// Points `tensors` at views of `buffer` (kByte, any device) as `layout` says.
void unpack_views(const std::vector<at::Tensor*>& tensors, const PackedLayout& layout,
                  const at::Tensor& buffer);

// The upload of one batch: the device buffer its tensors view (as `layout` says), and the event
// after its copy.
struct Upload {
  at::Tensor buffer;
  PackedLayout layout;
  c10::Event done;
  explicit Upload(c10::DeviceType type) : done(type) {}
};

class BatchUploader {
 public:
  // `device` not the CPU: a stream of its own from LibTorch's pool.
  explicit BatchUploader(c10::Device device);
  c10::Device device() const { return m_device; }
  // p (every tensor on the host) moved to the device as described above; sets p.upload.
  void upload(PreparedBatch& p) const;

 private:
  c10::Device m_device;
  std::unique_ptr<c10::Stream> m_stream;
};

// Before `p` is used on the current stream of its device: that stream waits for p's upload, and
// p's device buffer is marked as used by it. Nothing for a batch that was not uploaded.
void wait_for_upload(const PreparedBatch& p);

}  // namespace ddgnn
