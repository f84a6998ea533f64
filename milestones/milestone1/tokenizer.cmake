# The Llama 3 tokenizer (host C++ only): PCRE2 for the pre-tokenizer regex, nlohmann_json for
# tokenizer.json. Included by milestones/milestone1/CMakeLists.txt.
add_library(clockwork_tokenizer STATIC
  ${CMAKE_CURRENT_LIST_DIR}/tokenizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tokenizer_files.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tokenizer_train.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tokenizer_utf8.cpp)
target_include_directories(clockwork_tokenizer PUBLIC ${PROJECT_SOURCE_DIR})
# Neither library appears in tokenizer.h, so users of the tokenizer do not need their headers.
target_link_libraries(clockwork_tokenizer PRIVATE PkgConfig::PCRE2 nlohmann_json::nlohmann_json)

# The tests read the written tokenizer.json with nlohmann_json to check its contents.
clockwork_add_host_test(tokenizer_tests
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/tests/test_tokenizer.cpp
  LIBS clockwork_tokenizer nlohmann_json::nlohmann_json
  LABELS milestone1)
