// The examples of the kernels part (disttrain/kernels/copy_blocks.hpp): see
// snippets.hpp. copy_blocks_cuda.hpp's example needs CUDA and stays in the header.
#include <cstddef>
#include <span>
#include <vector>

#include "disttrain/kernels/copy_blocks.hpp"
#include "snippets.hpp"

namespace {

using snippets::check;

void copy_blocks() {
  std::vector<float> matrix(3 * 8), out(3 * 2);
  for (std::size_t i = 0; i < matrix.size(); ++i) matrix[i] = static_cast<float>(i);
  const auto src = std::as_bytes(std::span(matrix));
  const auto packed = std::as_writable_bytes(std::span(out));
  //! [copy_blocks]
  using disttrain::kernels::copy_block;
  // column slice [2, 4) of a 3 x 8 row-major matrix, packed contiguously:
  std::vector<copy_block> blocks{{2, 0, 3, 2, 8, 2}};
  disttrain::kernels::copy_blocks_cpu(src, packed, blocks, sizeof(float));
  //! [copy_blocks]
  check(out == std::vector<float>{2, 3, 10, 11, 18, 19}, "columns 2 and 3 of each row");
}

void copy_block() {
  //! [copy_block]
  disttrain::kernels::copy_block b{0, 0, 4, 16, 16, 16};  // 64 contiguous elements
  //! [copy_block]
  check(b.elements() == 64 && b.contiguous(), "copy_block");
}

}  // namespace

int main() {
  snippets::runner r("kernels");
  r.run("copy_blocks", copy_blocks);
  r.run("copy_block", copy_block);
  return r.finish();
}
