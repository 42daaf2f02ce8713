# Wraps a text file into a C++ header as a raw string literal.
file(READ ${IN} CONTENT)
file(WRITE ${OUT} "// Generated from ${IN}; do not edit.\n#pragma once\n#include <string_view>\ninline constexpr std::string_view kFlameGraphTemplate = R\"GFHTML(${CONTENT})GFHTML\";\n")
