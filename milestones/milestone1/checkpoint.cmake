# Checkpoint reading for milestone 1: config.json and safetensors (single file or sharded).
# Included by milestones/milestone1/CMakeLists.txt.

add_library(clockwork_checkpoint STATIC
  ${CMAKE_CURRENT_LIST_DIR}/config.cpp
  ${CMAKE_CURRENT_LIST_DIR}/safetensors.cpp)
target_include_directories(clockwork_checkpoint PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(clockwork_checkpoint PUBLIC nlohmann_json::nlohmann_json)

clockwork_add_host_test(checkpoint_tests
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/tests/test_safetensors.cpp
    ${CMAKE_CURRENT_LIST_DIR}/tests/test_config.cpp
  LIBS clockwork_checkpoint
  LABELS milestone1)
