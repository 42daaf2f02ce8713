# Wraps the flame graph page into a C++ header as a raw string literal, its
# style and scripts (/*@include NAME*/, files beside it) inlined: one
# self-contained page in the binary, kept as small files here.
file(READ ${IN} CONTENT)
get_filename_component(DIR ${IN} DIRECTORY)
string(REGEX MATCHALL "/\\*@include [A-Za-z0-9_.]+\\*/" INCLUDES "${CONTENT}")
foreach(MARK IN LISTS INCLUDES)
  string(REGEX REPLACE "/\\*@include ([A-Za-z0-9_.]+)\\*/" "\\1" NAME "${MARK}")
  file(READ ${DIR}/${NAME} PART)
  string(REPLACE "${MARK}" "${PART}" CONTENT "${CONTENT}")
endforeach()
file(WRITE ${OUT} "// Generated from ${IN}; do not edit.\n#pragma once\n#include <string_view>\ninline constexpr std::string_view kFlameGraphTemplate = R\"GFHTML(${CONTENT})GFHTML\";\n")
