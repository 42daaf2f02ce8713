# gpuflame_library(<target> SOURCES <files...> [DEPS <gpuflame libraries...>]
#                  [EXTERNAL <third-party targets...>])
#
# One static library per folder. The layering is enforced by include scope:
# a library sees the headers of its own folder and of the libraries it
# depends on (transitively), and nothing else. Headers are included by their
# repository path ("profiler/resolve/stack_table.h"), so each library exposes
# its folder through a private include root that holds a single symlink to
# it. An #include that runs against the data flow does not compile.
function(gpuflame_expose_folder target scope)
  file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  set(root ${PROJECT_BINARY_DIR}/include/${target})
  get_filename_component(parent ${root}/${rel} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  if(NOT EXISTS ${root}/${rel})
    file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR} ${root}/${rel} SYMBOLIC)
  endif()
  target_include_directories(${target} ${scope} ${root})
endfunction()

function(gpuflame_library target)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;EXTERNAL" ${ARGN})
  add_library(${target} STATIC ${ARG_SOURCES})
  gpuflame_expose_folder(${target} PUBLIC)
  target_link_libraries(${target} PUBLIC ${ARG_DEPS} ${ARG_EXTERNAL})
endfunction()
