# gpuflame_bpf_skeleton(<target> <skeleton-name> <source.bpf.c> [DEPENDS headers...])
# Compiles a BPF C file with clang and generates its libbpf skeleton header
# (<skeleton-name>.skel.h), which embeds the object: nothing ships beside the
# binary. <target> is an INTERFACE library that puts the header on the
# include path of whatever links it.
find_program(CLANG_EXECUTABLE NAMES clang clang-16 clang-15 clang-14 REQUIRED)
find_program(BPFTOOL_EXECUTABLE NAMES bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)

function(gpuflame_bpf_skeleton target name source)
  cmake_parse_arguments(ARG "" "" "DEPENDS" ${ARGN})
  set(out ${CMAKE_CURRENT_BINARY_DIR})
  # -mcpu=v3: atomic compare-and-swap (bpf/lib/backward_callers.bpf.h), kernel
  # 5.12+; bpf_loop already needs 5.17.
  add_custom_command(
    OUTPUT ${out}/${name}.bpf.o
    COMMAND ${CLANG_EXECUTABLE} -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_x86 -Wall -Werror
            -Wno-unused-function
            -I${CMAKE_SOURCE_DIR}/bpf -I${CMAKE_SOURCE_DIR}
            -I/usr/include/${CMAKE_LIBRARY_ARCHITECTURE}
            -c ${source} -o ${out}/${name}.bpf.o
    DEPENDS ${source} ${ARG_DEPENDS}
    COMMENT "Compiling BPF ${name}")
  add_custom_command(
    OUTPUT ${out}/${name}.skel.h
    COMMAND ${BPFTOOL_EXECUTABLE} gen skeleton ${out}/${name}.bpf.o name ${name} > ${out}/${name}.skel.h
    DEPENDS ${out}/${name}.bpf.o
    COMMENT "Generating skeleton ${name}.skel.h")
  add_custom_target(${target}_gen DEPENDS ${out}/${name}.skel.h)
  add_library(${target} INTERFACE)
  add_dependencies(${target} ${target}_gen)
  target_include_directories(${target} INTERFACE ${out})
endfunction()
