# Source lints: clang-format and clang-tidy, configured by .clang-format and
# .clang-tidy at the repository root. Written against version 14 (Debian's
# clang-format-14 and clang-tidy-14 packages); targets are skipped, with a
# note, where the tools are missing.
#
#   cmake --build build --target format-check  # lists files clang-format would change; fails if any
#   cmake --build build --target format        # rewrites them in place (mind others' edits)
#   cmake --build build --target tidy          # clang-tidy over every library source: ~10-20 s a
#                                              # file, ~15 min on 2 cores (run-clang-tidy uses all)
#   cmake --build build --target tidy-quick    # base/ and inspect/ only, < 1 min (ctest -R ClangTidyQuick)
#
# tidy reads compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS), so build
# once first: generated headers (BPF skeletons, .pb.h) must exist. It covers
# our library folders only, not generated code (build tree), tests or bench.
#
# This file is also the format-check script: cmake -DFORMAT=clang-format -DROOT=src -DLIST=files -P Lint.cmake

if(CMAKE_SCRIPT_MODE_FILE)
  # Script mode: check each file on the list, report which differ.
  file(STRINGS ${LIST} files)
  set(differ 0)
  list(LENGTH files total)
  foreach(f IN LISTS files)
    execute_process(COMMAND ${FORMAT} --style=file --dry-run -Werror ${f}
                    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    if(NOT rc EQUAL 0)
      math(EXPR differ "${differ} + 1")
      file(RELATIVE_PATH rel ${ROOT} ${f})
      message("  ${rel}")
    endif()
  endforeach()
  if(differ GREATER 0)
    message(FATAL_ERROR "format-check: ${differ} of ${total} files differ from .clang-format "
                        "(clang-format-14 --dry-run FILE shows how; the format target rewrites them)")
  endif()
  message("format-check: all ${total} files match .clang-format")
  return()
endif()

find_program(GPUFLAME_CLANG_FORMAT NAMES clang-format-14 clang-format)
find_program(GPUFLAME_RUN_CLANG_TIDY NAMES run-clang-tidy-14 run-clang-tidy)
find_program(GPUFLAME_CLANG_TIDY NAMES clang-tidy-14 clang-tidy)

# Ours: every C/C++ file in the source folders, except third-party and
# generated-elsewhere text (npm packages, the trimmed kernel type header).
set(_lint_globs)
foreach(dir agent app base bench bpf cupti exporters inspect profiler symbolizer
            tests/unit tests/e2e tests/support tests/fixtures)
  foreach(ext c cc h)
    list(APPEND _lint_globs ${PROJECT_SOURCE_DIR}/${dir}/*.${ext})
  endforeach()
endforeach()
file(GLOB_RECURSE GPUFLAME_FORMAT_SOURCES CONFIGURE_DEPENDS ${_lint_globs})
file(GLOB GPUFLAME_DEPLOY_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/deploy/*.cc)
list(APPEND GPUFLAME_FORMAT_SOURCES ${GPUFLAME_DEPLOY_SOURCES})
list(FILTER GPUFLAME_FORMAT_SOURCES EXCLUDE REGEX "/node_modules/|/vmlinux_min\\.h$")
list(SORT GPUFLAME_FORMAT_SOURCES)
string(REPLACE ";" "\n" _lint_list "${GPUFLAME_FORMAT_SOURCES}")
file(WRITE ${PROJECT_BINARY_DIR}/lint/format_sources.txt "${_lint_list}\n")

if(GPUFLAME_CLANG_FORMAT)
  add_custom_target(format-check
    COMMAND ${CMAKE_COMMAND} -DFORMAT=${GPUFLAME_CLANG_FORMAT} -DROOT=${PROJECT_SOURCE_DIR}
            -DLIST=${PROJECT_BINARY_DIR}/lint/format_sources.txt -P ${CMAKE_CURRENT_LIST_FILE}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "clang-format --dry-run over our sources"
    VERBATIM)
  add_custom_target(format
    COMMAND ${GPUFLAME_CLANG_FORMAT} --style=file -i ${GPUFLAME_FORMAT_SOURCES}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    COMMENT "clang-format -i over our sources"
    VERBATIM)
else()
  message(STATUS "clang-format not found: no format and format-check targets")
endif()

# clang-tidy: library sources as the compilation database names them. The
# header filter keeps diagnostics to our headers, whether reached directly or
# through a library's include root (build/include/gf_*/, symlinks to the
# folders): not absl's, not generated ones elsewhere in the build tree.
# run-clang-tidy takes regexes over file paths.
set(GPUFLAME_TIDY_HEADER_FILTER
    "^(${PROJECT_SOURCE_DIR}|${PROJECT_BINARY_DIR}/include/gf_[a-z_]+)/(agent|app|base|cupti|exporters|inspect|profiler|symbolizer)/")
set(GPUFLAME_TIDY_SOURCES "^${PROJECT_SOURCE_DIR}/(agent|app|base|cupti|exporters|inspect|profiler|symbolizer)/.*\\.cc$")
set(GPUFLAME_TIDY_QUICK_SOURCES "^${PROJECT_SOURCE_DIR}/(base|inspect)/.*\\.cc$")
if(GPUFLAME_RUN_CLANG_TIDY AND GPUFLAME_CLANG_TIDY)
  # .clang-tidy sets WarningsAsErrors, so any finding fails the command.
  set(_tidy ${GPUFLAME_RUN_CLANG_TIDY} -quiet -clang-tidy-binary ${GPUFLAME_CLANG_TIDY}
            -p ${PROJECT_BINARY_DIR} -header-filter ${GPUFLAME_TIDY_HEADER_FILTER})
  add_custom_target(tidy COMMAND ${_tidy} ${GPUFLAME_TIDY_SOURCES}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} COMMENT "clang-tidy over library sources" VERBATIM)
  # Also a ctest (tests/CMakeLists.txt): base/ and inspect/ take ~30 s on 2 cores.
  set(GPUFLAME_TIDY_QUICK_COMMAND ${_tidy} ${GPUFLAME_TIDY_QUICK_SOURCES})
  add_custom_target(tidy-quick COMMAND ${GPUFLAME_TIDY_QUICK_COMMAND}
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} COMMENT "clang-tidy over base/ and inspect/" VERBATIM)
else()
  message(STATUS "clang-tidy not found: no tidy targets")
endif()
