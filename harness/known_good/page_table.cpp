// Known-good page-table growth (milestones/milestone4/page_table.cpp's step).
#include "harness/known_good/host.h"
#include "kernels/steps.h"

namespace clockwork {

void grow_page_table(std::vector<int32_t>& table, std::vector<int32_t>& free_pages, int new_length, int page_size,
                     int32_t* device_table) {
  const size_t pages = (static_cast<size_t>(new_length) + static_cast<size_t>(page_size) - 1) / static_cast<size_t>(page_size);
  const size_t before = table.size();
  for (; table.size() < pages; free_pages.pop_back()) table.push_back(free_pages.back());
  if (table.size() != before) known_good::upload(device_table, table);
}

}  // namespace clockwork
