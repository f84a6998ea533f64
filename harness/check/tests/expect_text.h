// EXPECT_CONTAINS(text, part): the check tests' way to ask that a report says something, printing
// the whole report when it does not (a failure message is only useful with its context).
#pragma once

#include <string>

#include <gtest/gtest.h>

#define EXPECT_CONTAINS(haystack, needle)                                            \
  do {                                                                               \
    const std::string h_ = (haystack);                                               \
    EXPECT_NE(h_.find(needle), std::string::npos) << "missing: " << (needle) << "\n" \
                                                  << "in:\n"                         \
                                                  << h_;                             \
  } while (0)
