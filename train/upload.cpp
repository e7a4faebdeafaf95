// Batches moved to their device in one copy on the loader's own stream (train/upload.h).
#include "train/upload.h"

#include <ATen/ATen.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <cstring>

#include "core/error.h"
#include "train/model_setup.h"

namespace ddgnn {

std::vector<at::Tensor*> batch_tensors(PreparedBatch& p) {
  GraphBatch& b = p.batch;
  std::vector<at::Tensor*> out;
  for (at::Tensor* t :
       {&b.z, &b.pos, &b.edge_index, &b.edge_shift, &b.graph_of_atom, &b.atoms_per_graph, &b.cell,
        &b.node_inputs, &b.branch, &b.graph_attr, &b.energy, &b.forces, &b.stress, &b.stress_mask,
        &b.cap_boundary, &b.triplets, &b.laplacian_pe, &b.graph_weight, &b.atom_weight})
    if (t->defined()) out.push_back(t);
  if (b.species.defined() && !b.species.is_same(b.z)) out.push_back(&b.species);
  // The segment maps: copies of their own (they are shared, read-only, with the host batch), each
  // with its edge order explicit (the generic operations off the CPU read it).
  for (std::shared_ptr<const SegmentIndex>* s : {&b.receivers, &b.senders, &b.graphs}) {
    if (!*s) continue;
    auto copy = std::make_shared<SegmentIndex>(**s);
    if (!copy->order.defined()) copy->order = at::arange(copy->index.size(0), at::kLong);
    for (at::Tensor* t : {&copy->index, &copy->order, &copy->ptr}) out.push_back(t);
    *s = copy;
  }
  for (at::Tensor& c : p.columns)
    if (c.defined()) out.push_back(&c);
  if (p.share.defined()) out.push_back(&p.share);
  return out;
}

bool PackedLayout::operator==(const PackedLayout& o) const {
  if (bytes != o.bytes || pieces.size() != o.pieces.size()) return false;
  for (size_t k = 0; k < pieces.size(); ++k)
    if (pieces[k].offset != o.pieces[k].offset || pieces[k].dtype != o.pieces[k].dtype ||
        pieces[k].shape != o.pieces[k].shape)
      return false;
  return true;
}

PackedLayout pack_layout(const std::vector<at::Tensor*>& tensors) {
  PackedLayout layout;
  for (const at::Tensor* t : tensors) {
    PackedLayout::Piece piece;
    piece.offset = layout.bytes;
    piece.dtype = t->scalar_type();
    piece.shape = t->sizes().vec();
    const int64_t bytes = t->numel() * int64_t(t->element_size());
    layout.bytes +=
        (bytes + PackedLayout::kAlign - 1) / PackedLayout::kAlign * PackedLayout::kAlign;
    layout.pieces.push_back(std::move(piece));
  }
  return layout;
}

void pack(const std::vector<at::Tensor*>& tensors, const PackedLayout& layout,
          const at::Tensor& buffer) {
  if (buffer.scalar_type() != at::kByte || !buffer.device().is_cpu() ||
      buffer.numel() < layout.bytes)
    throw Error("pack: the buffer must be host bytes of at least the layout's size");
  uint8_t* base = buffer.data_ptr<uint8_t>();
  for (size_t k = 0; k < tensors.size(); ++k) {
    const at::Tensor t = tensors[k]->contiguous();
    if (!t.device().is_cpu()) throw Error("pack: every tensor of the batch must be on the host");
    std::memcpy(base + layout.pieces[k].offset, t.data_ptr(), size_t(t.nbytes()));
  }
}

void unpack_views(const std::vector<at::Tensor*>& tensors, const PackedLayout& layout,
                  const at::Tensor& buffer) {
  for (size_t k = 0; k < tensors.size(); ++k) {
    const PackedLayout::Piece& piece = layout.pieces[k];
    int64_t numel = 1;
    for (int64_t d : piece.shape) numel *= d;
    const int64_t bytes = numel * int64_t(c10::elementSize(piece.dtype));
    *tensors[k] = buffer.narrow(0, piece.offset, bytes).view(piece.dtype).view(piece.shape);
  }
}

BatchUploader::BatchUploader(c10::Device device) : m_device(device) {
  if (device.is_cpu()) throw Error("BatchUploader: batches on the CPU are not uploaded");
  const c10::impl::VirtualGuardImpl guard(device.type());
  m_stream = std::make_unique<c10::Stream>(guard.getStreamFromGlobalPool(device));
}

void BatchUploader::upload(PreparedBatch& p) const {
  const bool species_is_z = p.batch.species.is_same(p.batch.z);  // GraphBatch::species is z
  const std::vector<at::Tensor*> tensors = batch_tensors(p);
  const PackedLayout layout = pack_layout(tensors);
  const at::Tensor staging =
      at::empty({layout.bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  pack(tensors, layout, staging);
  auto up = std::make_shared<Upload>(m_device.type());
  {
    // On the loader's stream: the device buffer's memory belongs to it, and the copy waits for
    // nothing the steps enqueue. The pinned staging block is reused once the copy is done.
    const c10::StreamGuard on(*m_stream);
    up->buffer = at::empty({layout.bytes}, at::TensorOptions().dtype(at::kByte).device(m_device));
    up->buffer.copy_(staging, /*non_blocking=*/true);
    up->done.record(*m_stream);
  }
  unpack_views(tensors, layout, up->buffer);
  up->layout = layout;
  if (species_is_z) p.batch.species = p.batch.z;
  p.upload = std::move(up);
}

void wait_for_upload(const PreparedBatch& p) {
  if (!p.upload) return;
  const c10::Device device = p.upload->buffer.device();
  const c10::impl::VirtualGuardImpl guard(device.type());
  const c10::Stream current = guard.getStream(device);
  p.upload->done.block(current);
  p.upload->buffer.record_stream(current);
}

}  // namespace ddgnn
