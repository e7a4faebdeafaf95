// The small-operand matrix products of model/small_mm.h: CPU kernels with the small operand's
// columns in vectors (GCC's vector extension), as autograd functions whose backward passes call
// each other. The register blocks are sized to the CPU's vector registers: 64-byte vectors in
// blocks for AVX-512's 32 registers, 32-byte vectors in smaller blocks for AVX2's 16 (the 64-byte
// blocks spill to the stack there and run 5-10 times slower than OpenBLAS); on an x86 CPU with
// neither, ATen's products.
#include "model/small_mm.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "model/device.h"
#include "model/kernels.h"
#include "model/simd.h"

namespace ddgnn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The vectors the kernels compute in: VB bytes (64: AVX-512, 32: AVX2). The packed layout and the
// tiles stay in 64-byte units (Lanes) either way: a 64-byte vector is two 32-byte ones.
template <typename T, int VB>
struct Vec {
  typedef T V __attribute__((vector_size(VB)));
  static constexpr int64_t n = int64_t(VB / sizeof(T));
  static constexpr int per_lanes = 64 / VB;  // vectors of VB bytes in one of Lanes<T>
};
template <typename T>
using Lanes = Vec<T, 64>;

// The AVX2 versions of the loops (kernels.h's DDGNN_AVX2_LOOP), with products and sums fused
// into FMAs as ATen's own products do.
#if defined(__x86_64__) && defined(__GNUC__)
#define DDGNN_AVX2_KERNEL __attribute__((target("avx2,fma"), optimize("O3", "fp-contract=fast")))
#else
#define DDGNN_AVX2_KERNEL
#endif

using kernels::cpu_kernels;
using kernels::CpuKernels;

constexpr int64_t kMaxVectors = 4;   // columns of one tile of the small operand: 4 vectors
constexpr int64_t kMaxTiles = 8;     // tiles of the small operand: at most 32 vectors
constexpr int64_t kMaxInner = 1024;  // rows of small_mm's right operand (it stays in L1/L2)
constexpr int64_t kRowChunk = 256;   // rows of x and g that small_tn sums per pass
constexpr int64_t kTileRows = 64;    // rows of x that small_mm takes through every tile in turn

int64_t ceil_div(int64_t n, int64_t d) {
  return (n + d - 1) / d;
}

// Columns [c0, c0 + n) of a product, nb vectors: as few tiles of at most kMaxVectors vectors as
// the columns need, their vector counts differing by at most one (6 vectors: 3 + 3, not 4 + 2).
// offset: where the tile starts in the packed small operand of k rows (nb vectors a row).
struct Tile {
  int64_t c0, n, nb, offset;
};
template <typename T>
std::vector<Tile> tiles_of(int64_t n, int64_t k) {
  const int64_t lanes = Lanes<T>::n, nb = ceil_div(n, lanes), count = ceil_div(nb, kMaxVectors);
  std::vector<Tile> tiles;
  int64_t c0 = 0, offset = 0;
  for (int64_t t = 0; t < count; ++t) {
    const int64_t v = nb / count + (t < nb % count ? 1 : 0);
    const int64_t w = std::min(v * lanes, n - c0);
    tiles.push_back({c0, w, v, offset});
    c0 += w;
    offset += k * v * lanes;
  }
  return tiles;
}

// a [K, N] (any strides) packed by tiles: each tile's K rows of nb vectors, zero past its
// columns. Into `out`, whose memory is kept between calls (a thread's products reuse it).
template <typename T>
const T* pack(const at::Tensor& a, const std::vector<Tile>& tiles, std::vector<T>& out) {
  const int64_t k = a.size(0), s0 = a.stride(0), s1 = a.stride(1);
  out.assign(size_t(tiles.back().offset + k * tiles.back().nb * Lanes<T>::n), T(0));
  const T* p = a.data_ptr<T>();
  for (const Tile& t : tiles) {
    const int64_t width = t.nb * Lanes<T>::n;
    for (int64_t r = 0; r < k; ++r) {
      T* o = out.data() + t.offset + r * width;
      const T* src = p + r * s0 + t.c0 * s1;
      for (int64_t c = 0; c < t.n; ++c) o[c] = src[c * s1];
    }
  }
  return out.data();
}

// R rows of y (stride ldy, n columns) = x rows (stride ldx) @ the packed a [k, NB 64-byte
// vectors] (+ packed bias), the R x NB sums in registers of VB bytes.
template <typename T, int NB, int R, int VB>
__attribute__((always_inline)) inline void mm_rows(const T* x, int64_t ldx, const T* ap,
                                                   const T* bp, T* y, int64_t ldy, int64_t n,
                                                   int64_t k) {
  using V = typename Vec<T, VB>::V;
  constexpr int64_t L = Vec<T, VB>::n;
  constexpr int NV = NB * Vec<T, VB>::per_lanes;  // vectors of VB bytes in a row of the tile
  V acc[R][NV];
  for (int b = 0; b < NV; ++b) {
    const V v = bp != nullptr ? load_vec<V>(bp + b * L) : V{};
    for (int r = 0; r < R; ++r) acc[r][b] = v;
  }
  for (int64_t q = 0; q < k; ++q) {
    V w[NV];
    for (int b = 0; b < NV; ++b) w[b] = load_vec<V>(ap + (q * NV + b) * L);
    for (int r = 0; r < R; ++r) {
      const T s = x[r * ldx + q];
      for (int b = 0; b < NV; ++b) acc[r][b] += s * w[b];
    }
  }
  for (int r = 0; r < R; ++r) {
    T* yr = y + r * ldy;
    if (n == NV * L) {
      for (int b = 0; b < NV; ++b) store_vec(yr + b * L, acc[r][b]);
    } else {
      T buf[NV * L];
      std::memcpy(buf, acc[r], sizeof buf);
      std::memcpy(yr, buf, size_t(n) * sizeof(T));
    }
  }
}

// Rows of x that small_mm takes through a tile at once, NB 64-byte vectors wide: 4 x NB sums of
// 64 bytes for AVX-512's 32 registers; at most 8 sums of 32 bytes for AVX2's 16.
constexpr int mm_block_rows(int nb, int vb) {
  return vb == 64 ? 4 : nb == 1 ? 4 : nb == 2 ? 2 : 1;
}

// Rows [begin, end) of one tile of small_mm (n columns of y, row stride ldy), R at a time.
template <typename T, int NB, int VB>
__attribute__((always_inline)) inline void mm_loop_body(const T* x, int64_t ldx, const T* ap,
                                                        const T* bp, T* y, int64_t ldy,
                                                        int64_t begin, int64_t end, int64_t n,
                                                        int64_t k) {
  constexpr int R = mm_block_rows(NB, VB);
  int64_t m = begin;
  for (; m + R <= end; m += R)
    mm_rows<T, NB, R, VB>(x + m * ldx, ldx, ap, bp, y + m * ldy, ldy, n, k);
  for (; m < end; ++m) mm_rows<T, NB, 1, VB>(x + m * ldx, ldx, ap, bp, y + m * ldy, ldy, n, k);
}

template <typename T, int NB>
DDGNN_VECTOR_KERNEL void mm_loop(const T* x, int64_t ldx, const T* ap, const T* bp, T* y,
                                 int64_t ldy, int64_t begin, int64_t end, int64_t n, int64_t k) {
  mm_loop_body<T, NB, 64>(x, ldx, ap, bp, y, ldy, begin, end, n, k);
}

template <typename T, int NB>
DDGNN_AVX2_KERNEL void mm_loop_avx2(const T* x, int64_t ldx, const T* ap, const T* bp, T* y,
                                    int64_t ldy, int64_t begin, int64_t end, int64_t n, int64_t k) {
  mm_loop_body<T, NB, 32>(x, ldx, ap, bp, y, ldy, begin, end, n, k);
}

// KB rows of z [.., n] = x columns [k0, k0 + kb) ^T @ g, summed over `rows` rows in registers of
// VB bytes (added to z when `accumulate`).
// g's rows are read as whole 64-byte vectors (lanes past n dropped) where that stays inside g's
// memory (rows below safe_rows), through a copy in the last rows.
template <typename T, int NB, int KB, bool Full, int VB>
__attribute__((always_inline)) inline void tn_block(const T* x, int64_t ldx, const T* g,
                                                    int64_t ldg, T* z, int64_t ldz, int64_t rows,
                                                    int64_t safe_rows, int64_t n, int64_t kb,
                                                    bool accumulate) {
  using V = typename Vec<T, VB>::V;
  constexpr int64_t L = Vec<T, VB>::n;
  constexpr int NV = NB * Vec<T, VB>::per_lanes;
  V acc[KB][NV];
  for (int j = 0; j < KB; ++j)
    for (int b = 0; b < NV; ++b) acc[j][b] = V{};
  for (int64_t m = 0; m < rows; ++m) {
    V gv[NV];
    const T* gr = g + m * ldg;
    if (m < safe_rows) {
      for (int b = 0; b < NV; ++b) gv[b] = load_vec<V>(gr + b * L);
    } else {
      T buf[NV * L] = {};
      std::memcpy(buf, gr, size_t(n) * sizeof(T));
      std::memcpy(gv, buf, sizeof buf);
    }
    const T* xr = x + m * ldx;
    for (int j = 0; j < KB; ++j) {
      if (!Full && j >= kb) break;
      const T s = xr[j];
      for (int b = 0; b < NV; ++b) acc[j][b] += s * gv[b];
    }
  }
  for (int j = 0; j < (Full ? KB : int(kb)); ++j) {
    T buf[NV * L];
    std::memcpy(buf, acc[j], sizeof buf);
    if (accumulate)
      for (int64_t c = 0; c < n; ++c) z[j * ldz + c] += buf[c];
    else
      std::memcpy(z + j * ldz, buf, size_t(n) * sizeof(T));
  }
}

// The columns of x that small_tn sums per block for NB 64-byte vectors of g: KB x NB sums in
// registers, 16 of 64 bytes for AVX-512, at most 8 of 32 bytes for AVX2.
constexpr int tn_block_columns(int64_t nb, int vb) {
  return vb == 64 ? int(16 / nb) : std::max(1, int(4 / nb));
}

// Blocks [block_begin, block_end) of KB columns of x for one tile of small_tn: the n columns of
// g from g (of which `avail` are left in each row, n included) into z (row stride ldz).
template <typename T, int NB, int VB>
__attribute__((always_inline)) inline void tn_loop_body(const T* x, int64_t ldx, const T* g,
                                                        int64_t ldg, int64_t avail, T* z,
                                                        int64_t ldz, int64_t rows, int64_t k,
                                                        int64_t n, int64_t block_begin,
                                                        int64_t block_end) {
  constexpr int KB = tn_block_columns(NB, VB);
  constexpr int64_t W = NB * Lanes<T>::n;
  // Row m's vectors end at m ldg + W; g's last value is at (rows - 1) ldg + avail - 1.
  const int64_t room = (rows - 1) * ldg + avail - W;
  const int64_t safe_rows = room < 0 ? 0 : std::min(rows, room / std::max<int64_t>(ldg, 1) + 1);
  // Chunks of rows, every block of columns per chunk: the chunk's x and g rows stay in L1/L2
  // while the blocks read them again.
  for (int64_t m0 = 0; m0 < rows; m0 += kRowChunk) {
    const int64_t mr = std::min(kRowChunk, rows - m0);
    const int64_t safe = std::clamp<int64_t>(safe_rows - m0, 0, mr);
    const T* xc = x + m0 * ldx;
    const T* gc = g + m0 * ldg;
    for (int64_t blk = block_begin; blk < block_end; ++blk) {
      const int64_t k0 = blk * KB, kb = std::min<int64_t>(KB, k - k0);
      if (kb == KB)
        tn_block<T, NB, KB, true, VB>(xc + k0, ldx, gc, ldg, z + k0 * ldz, ldz, mr, safe, n, kb,
                                      m0 > 0);
      else
        tn_block<T, NB, KB, false, VB>(xc + k0, ldx, gc, ldg, z + k0 * ldz, ldz, mr, safe, n, kb,
                                       m0 > 0);
    }
  }
}

template <typename T, int NB>
DDGNN_VECTOR_KERNEL void tn_loop(const T* x, int64_t ldx, const T* g, int64_t ldg, int64_t avail,
                                 T* z, int64_t ldz, int64_t rows, int64_t k, int64_t n,
                                 int64_t block_begin, int64_t block_end) {
  tn_loop_body<T, NB, 64>(x, ldx, g, ldg, avail, z, ldz, rows, k, n, block_begin, block_end);
}

template <typename T, int NB>
DDGNN_AVX2_KERNEL void tn_loop_avx2(const T* x, int64_t ldx, const T* g, int64_t ldg, int64_t avail,
                                    T* z, int64_t ldz, int64_t rows, int64_t k, int64_t n,
                                    int64_t block_begin, int64_t block_end) {
  tn_loop_body<T, NB, 32>(x, ldx, g, ldg, avail, z, ldz, rows, k, n, block_begin, block_end);
}

// with_width(nb, f): f(std::integral_constant<int, NB>) for a tile of nb = NB 64-byte vectors
// (1 to 4), so that each width runs its own instance of the loops.
template <typename F>
void with_width(int64_t nb, F f) {
  switch (nb) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    default:
      return f(std::integral_constant<int, 4>{});
  }
}

// One tile of small_mm through the loop of this CPU's vectors and of the tile's width.
template <typename T>
void mm_tile(bool avx2, int64_t nb, const T* x, int64_t ldx, const T* ap, const T* bp, T* y,
             int64_t ldy, int64_t begin, int64_t end, int64_t n, int64_t k) {
  with_width(nb, [&](auto w) {
    constexpr int kNb = decltype(w)::value;
    (avx2 ? mm_loop_avx2<T, kNb> : mm_loop<T, kNb>)(x, ldx, ap, bp, y, ldy, begin, end, n, k);
  });
}

// Blocks [begin, end) of one tile of small_tn, likewise.
template <typename T>
void tn_tile(bool avx2, int64_t nb, const T* x, int64_t ldx, const T* g, int64_t ldg, int64_t avail,
             T* z, int64_t ldz, int64_t rows, int64_t k, int64_t n, int64_t begin, int64_t end) {
  with_width(nb, [&](auto w) {
    constexpr int kNb = decltype(w)::value;
    (avx2 ? tn_loop_avx2<T, kNb> : tn_loop<T, kNb>)(x, ldx, g, ldg, avail, z, ldz, rows, k, n,
                                                    begin, end);
  });
}

// t itself when its rows are contiguous (stride 1 along dim 1), else a contiguous copy.
at::Tensor row_major(const at::Tensor& t) {
  return (t.stride(1) == 1 || t.size(1) <= 1) && t.stride(0) >= t.size(1) ? t : t.contiguous();
}

at::Tensor small_mm_raw(const at::Tensor& x_in, const at::Tensor& a, const at::Tensor& bias) {
  const at::Tensor x = row_major(x_in);
  const int64_t m = x.size(0), k = x.size(1), n = a.size(1);
  at::Tensor y = at::empty({m, n}, x.options());
  if (m == 0 || n == 0) return y;
  const bool avx2 = kernels::avx2_loops();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "small_mm", [&] {
    const std::vector<Tile> tiles = tiles_of<scalar_t>(n, k), bias_tiles = tiles_of<scalar_t>(n, 1);
    static thread_local std::vector<scalar_t> a_buf, b_buf;
    const scalar_t* ap = pack<scalar_t>(a, tiles, a_buf);
    const scalar_t* bptr =
        bias.defined() ? pack<scalar_t>(bias.reshape({1, n}), bias_tiles, b_buf) : nullptr;
    const scalar_t* xp = x.data_ptr<scalar_t>();
    scalar_t* yp = y.data_ptr<scalar_t>();
    const int64_t ldx = x.stride(0);
    at::parallel_for(0, m, 512, [&](int64_t begin, int64_t end) {
      // Rows through every tile in turn, kTileRows at a time: x's rows stay in L1 across tiles.
      for (int64_t r0 = begin; r0 < end; r0 += kTileRows) {
        const int64_t r1 = std::min(end, r0 + kTileRows);
        for (size_t t = 0; t < tiles.size(); ++t) {
          const Tile& tile = tiles[t];
          const scalar_t* at = ap + tile.offset;
          const scalar_t* bt = bptr == nullptr ? nullptr : bptr + bias_tiles[t].offset;
          scalar_t* yt = yp + tile.c0;
          mm_tile<scalar_t>(avx2, tile.nb, xp, ldx, at, bt, yt, n, r0, r1, tile.n, k);
        }
      }
    });
  });
  return y;
}

at::Tensor small_tn_raw(const at::Tensor& x_in, const at::Tensor& g_in) {
  const at::Tensor x = row_major(x_in), g = row_major(g_in);
  const int64_t rows = x.size(0), k = x.size(1), n = g.size(1);
  if (rows == 0 || k == 0 || n == 0) return at::zeros({k, n}, x.options());
  at::Tensor z = at::empty({k, n}, x.options());
  const bool avx2 = kernels::avx2_loops();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "small_tn", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    const scalar_t* gp = g.data_ptr<scalar_t>();
    scalar_t* zp = z.data_ptr<scalar_t>();
    const int64_t ldx = x.stride(0), ldg = g.stride(0);
    for (const Tile& t : tiles_of<scalar_t>(n, 0)) {
      const scalar_t* gt = gp + t.c0;
      scalar_t* zt = zp + t.c0;
      const int64_t avail = n - t.c0;
      const int64_t blocks = ceil_div(k, tn_block_columns(t.nb, avx2 ? 32 : 64));
      at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
        tn_tile<scalar_t>(avx2, t.nb, xp, ldx, gt, ldg, avail, zt, n, rows, k, t.n, begin, end);
      });
    }
  });
  return z;
}

struct SmallMm : public torch::autograd::Function<SmallMm> {
  // bias: [N], or empty for none (an undefined tensor cannot be an input of a custom function).
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& a,
                            const at::Tensor& bias) {
    ctx->save_for_backward({x, a});
    return small_mm_raw(x, a, bias.numel() > 0 ? bias : at::Tensor());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &a = saved[1], &g = grad[0];
    at::Tensor dx, da, db;
    if (ctx->needs_input_grad(0)) dx = small_mm(g, a.t());
    if (ctx->needs_input_grad(1)) da = small_tn(x, g);
    if (ctx->needs_input_grad(2)) db = g.sum(0);
    return {dx, da, db};
  }
};

struct SmallTn : public torch::autograd::Function<SmallTn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& g) {
    ctx->save_for_backward({x, g});
    return small_tn_raw(x, g);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &g = saved[1], &d = grad[0];
    at::Tensor dx, dg;
    if (ctx->needs_input_grad(0)) dx = small_mm(g, d.t());
    if (ctx->needs_input_grad(1)) dg = small_mm(x, d);
    return {dx, dg};
  }
};

// Whether autograd would record an op on t.
bool differentiable(const at::Tensor& t) {
  return t.requires_grad() && at::GradMode::is_enabled();
}

// Whether the kernels take x [M, K] with a small operand of n columns (`other`).
bool fits(const at::Tensor& x, const at::Tensor& other, int64_t n) {
  if (!fused_kernels(x) || !other.device().is_cpu() || cpu_kernels() == CpuKernels::kNone)
    return false;
  const auto type = x.scalar_type();
  if ((type != at::kFloat && type != at::kDouble) || other.scalar_type() != type) return false;
  const int64_t lanes = type == at::kFloat ? Lanes<float>::n : Lanes<double>::n;
  return n >= 1 && n <= kMaxTiles * kMaxVectors * lanes;
}

}  // namespace

at::Tensor small_mm(const at::Tensor& x, const at::Tensor& a, const at::Tensor& bias) {
  const bool shapes =
      x.dim() == 2 && a.dim() == 2 && x.size(1) == a.size(0) && a.size(0) <= kMaxInner &&
      (!bias.defined() || (bias.dim() == 1 && bias.size(0) == a.size(1) &&
                           bias.scalar_type() == x.scalar_type() && bias.device().is_cpu()));
  if (shapes && fits(x, a, a.size(1))) {
    if (!differentiable(x) && !differentiable(a) && !(bias.defined() && differentiable(bias)))
      return small_mm_raw(x, a, bias);  // no autograd node to build
    return SmallMm::apply(x, a, bias.defined() ? bias : at::empty({0}, x.options()));
  }
  return bias.defined() ? at::addmm(bias, x, a) : at::mm(x, a);
}

at::Tensor small_tn(const at::Tensor& x, const at::Tensor& g) {
  if (x.dim() == 2 && g.dim() == 2 && x.size(0) == g.size(0) && fits(x, g, g.size(1)))
    return differentiable(x) || differentiable(g) ? SmallTn::apply(x, g) : small_tn_raw(x, g);
  return at::mm(x.t(), g);
}

std::string small_mm_kernels() {
  switch (cpu_kernels()) {
    case CpuKernels::kAvx2:
      return "AVX2 (32-byte vectors)";
    case CpuKernels::kNone:
      return "ATen's products";
    default:
      return "64-byte vectors";
  }
}

at::Tensor small_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (x.dim() < 2 || weight.dim() != 2) return at::linear(x, weight, bias);
  if (x.dim() == 2) return small_mm(x, weight.t(), bias);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  return small_mm(x.reshape({-1, x.size(-1)}), weight.t(), bias).view(shape);
}

at::Tensor dense(const torch::nn::LinearImpl& module, const at::Tensor& x) {
  return small_linear(x, module.weight, module.bias);
}

}  // namespace ddgnn
