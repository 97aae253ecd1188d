# Adds the device kit's probe to a CUDA build of Meridian without touching the project's CMakeLists:
# scripts/gpu-kit configures with -DCMAKE_PROJECT_INCLUDE=<this file>, which CMake reads right after the
# top-level project(); the target is added once every folder has been processed, so meridian_cuda and
# meridian_daemon exist by then.
cmake_language(DEFER CALL _meridian_gpu_kit_probe)
function(_meridian_gpu_kit_probe)
  if(NOT TARGET meridian_cuda)
    message(FATAL_ERROR "the device kit needs the CUDA backend (MERIDIAN_CUDA=1)")
  endif()
  find_package(nlohmann_json 3 REQUIRED)
  add_executable(meridian_snapshot_overlap_probe ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/snapshot_overlap_probe.cc)
  target_link_libraries(meridian_snapshot_overlap_probe
    PRIVATE meridian_cuda meridian_daemon meridian_models nlohmann_json::nlohmann_json)
  set_target_properties(meridian_snapshot_overlap_probe PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
endfunction()
