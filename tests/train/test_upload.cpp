// The loader's upload of a batch (train/upload.h), the part that runs on the host: every tensor of
// a prepared batch packed into one byte buffer at aligned offsets, and the batch rebuilt as views
// of that buffer equals the batch it was packed from, segment maps and column targets included.
// (The copy to a GPU and the stream's wait run in tests/gpu.)
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../common/graph_block.h"
#include "../common/small_spec.h"
#include "core/error.h"
#include "train/model_setup.h"
#include "train/upload.h"

namespace ddgnn {
namespace {

PreparedBatch prepared(const std::string& type) {
  ModelSetup setup;
  setup.spec = testing::small_spec(type, 3.0);
  setup.spec.heads.push_back({"gap", HeadSpec::kGraph, 1});
  setup.graph.radius = 3.0;
  setup.periodic = true;
  setup.targets = testing::targets_of(setup.spec, true);
  setup.targets.heads[1].source = TargetSource::kColumn;
  setup.targets.heads[1].column = 0;
  setup.norm.column_mean = {{}, {0.5}};
  setup.norm.column_std = {{}, {2.0}};
  return prepare_batch(testing::test_block(), {0, 1}, setup);
}

void expect_same(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  ASSERT_EQ(a.defined(), b.defined()) << what;
  if (!a.defined()) return;
  EXPECT_EQ(a.scalar_type(), b.scalar_type()) << what;
  EXPECT_EQ(a.sizes(), b.sizes()) << what;
  EXPECT_TRUE(at::equal(a, b)) << what;
}

TEST(Upload, PackedViewsEqualTheBatch) {
  for (const std::string type : {"DimeNet", "SchNet"}) {
    const PreparedBatch before = prepared(type);
    PreparedBatch p = before;
    const std::vector<at::Tensor*> tensors = batch_tensors(p);
    const PackedLayout layout = pack_layout(tensors);
    ASSERT_EQ(layout.pieces.size(), tensors.size());
    for (const auto& piece : layout.pieces) EXPECT_EQ(piece.offset % PackedLayout::kAlign, 0);
    const at::Tensor buffer = at::empty({layout.bytes}, at::kByte);
    pack(tensors, layout, buffer);
    unpack_views(tensors, layout, buffer);
    const GraphBatch &a = before.batch, &b = p.batch;
    // Every moved tensor now lives in the one buffer.
    for (const at::Tensor* t : tensors) EXPECT_TRUE(t->is_alias_of(buffer)) << type;
    expect_same(b.z, a.z, "z");
    expect_same(b.pos, a.pos, "pos");
    expect_same(b.edge_index, a.edge_index, "edge_index");
    expect_same(b.edge_shift, a.edge_shift, "edge_shift");
    expect_same(b.graph_of_atom, a.graph_of_atom, "graph_of_atom");
    expect_same(b.atoms_per_graph, a.atoms_per_graph, "atoms_per_graph");
    expect_same(b.cell, a.cell, "cell");
    expect_same(b.energy, a.energy, "energy");
    expect_same(b.forces, a.forces, "forces");
    expect_same(b.stress, a.stress, "stress");
    expect_same(b.stress_mask, a.stress_mask, "stress_mask");
    expect_same(b.triplets, a.triplets, "triplets");
    if (type == "DimeNet") {
      EXPECT_TRUE(b.triplets.defined());
    }
    for (auto [x, y] : {std::pair{b.receivers, a.receivers}, std::pair{b.senders, a.senders},
                        std::pair{b.graphs, a.graphs}}) {
      expect_same(x->index, y->index, "segment index");
      expect_same(x->ptr, y->ptr, "segment ptr");
      EXPECT_EQ(x->n_rows, y->n_rows);
      // The edge order made explicit (identity where the host left it out: a sorted index).
      ASSERT_TRUE(x->order.defined());
      expect_same(x->order, y->order.defined() ? y->order : at::arange(y->index.size(0)),
                  "segment order");
    }
    ASSERT_EQ(p.columns.size(), 2u);
    expect_same(p.columns[1], before.columns[1], "column target");
    EXPECT_TRUE(b.species.is_same(b.z) || at::equal(b.species, a.species));
  }
}

TEST(Upload, AnUploaderIsForADeviceOtherThanTheCpu) {
  EXPECT_THROW(BatchUploader(c10::Device(c10::kCPU)), Error);
}

}  // namespace
}  // namespace ddgnn
