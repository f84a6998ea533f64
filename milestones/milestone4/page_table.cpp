/// @file page_table.cpp
/// Milestone 4: the page table of a paged KV cache grows as the sequence does.
///
/// PagedKvCache (harness/pipeline/kv_cache.h) calls grow_page_table before each prefill or decode
/// step with the length the sequence is about to reach. Pages come from a shared pool only when
/// the sequence needs them, which is what lets a server hold many sequences of unknown length.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "harness/check/cuda_check.h"
#include "kernels/steps.h"

namespace clockwork {

void grow_page_table(std::vector<int32_t>& table, std::vector<int32_t>& free_pages, int new_length,
                     int page_size, int32_t* device_table) {
  // BEGIN SOLUTION(m4): Give the sequence the pages that positions < new_length need: while the
  // page table holds fewer than ceil(new_length / page_size) entries, take the next free page
  // (free_pages.back(), then pop it) and append it to table. When the table changed, copy it to
  // device_table (cudaMemcpy, host to device) so that the kernels see the new entries. A decode
  // step crosses into a new page only every page_size tokens; the other steps add nothing.
  const size_t needed = (static_cast<size_t>(new_length) + page_size - 1) / page_size;
  if (needed <= table.size()) return;
  while (table.size() < needed) {
    table.push_back(free_pages.back());
    free_pages.pop_back();
  }
  CUDA_CHECK(cudaMemcpy(device_table, table.data(), table.size() * sizeof(int32_t),
                        cudaMemcpyHostToDevice));
  // STUB: (void)table; (void)free_pages; (void)new_length; (void)page_size; (void)device_table;
  // END SOLUTION
}

}  // namespace clockwork
