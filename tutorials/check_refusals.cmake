# The test tutorial:05_attention_scoring:command-line: the common options'
# refusals (common/tutorial.cpp, Tutorial::parse_arguments). Each bad command
# line must exit with status 2 and say what is wrong in the language --lang
# chose, wherever --lang stands; --help must print the usage and exit with 0.
#
#   cmake -DPROGRAM=tutorial_05_attention_scoring -DOUT=dir -P check_refusals.cmake
cmake_minimum_required(VERSION 3.20)  # script mode: today's policies
# Each case: the arguments (a ';'-list, written with '|' here) and a text its stderr must hold.
set(cases
  "--lang|en|--bogus=unknown argument '--bogus'"
  "--bogus|--lang|zh=未知参数 '--bogus'"
  "--lang|en|extra=unknown argument 'extra'"
  "--lang|en|--out=--out needs a folder after it"
  "--out|--lang|zh=--out 后面要跟一个目录"
  "--lang|en|--from=--from needs a step after it, e.g. --from 3 or --from 2b"
  "--only|--lang|zh=--only 后面要跟一个步骤，例如 --only 3 或 --only 2b"
  "--lang|en|--from|3|--only|4=give one --from or --only, not several"
  "--lang|en|--from|3|--from|4=give one --from or --only, not several"
  "--lang|fr=--lang needs en or zh after it"
  "--lang|en|--plot-format|gif=--plot-format needs png or svg after it"
  "--lang|zh|--plot-format=--plot-format 后面要跟 png 或 svg"
  "--lang|en|--inject-fault=--inject-fault needs a fault's name after it"
  "--lang|en|--literal=this tutorial has no literal mode"
  "--lang|zh|--literal=这个教程没有 literal 模式"
  "--lang|en|--exercise|--only|2=--exercise runs the exercise instead")
set(failures "")
file(MAKE_DIRECTORY ${OUT})  # a refused run writes nothing; a run that is not refused writes here
foreach(case ${cases})
  string(FIND "${case}" "=" at)
  string(SUBSTRING "${case}" 0 ${at} args)
  math(EXPR at "${at} + 1")
  string(SUBSTRING "${case}" ${at} -1 expected)
  string(REPLACE "|" ";" args "${args}")
  execute_process(COMMAND ${PROGRAM} ${args} WORKING_DIRECTORY ${OUT}
                  OUTPUT_VARIABLE output ERROR_VARIABLE errors RESULT_VARIABLE status)
  string(FIND "${errors}" "${expected}" found)
  string(FIND "${errors}" "--plot-format png|svg" usage)
  if(NOT status STREQUAL "2" OR found EQUAL -1 OR usage EQUAL -1)
    string(APPEND failures "\n${args}: exit status ${status} (expected 2), stderr:\n${errors}"
                           "(expected the usage and: ${expected})\n")
  endif()
endforeach()
foreach(help --help -h)
  execute_process(COMMAND ${PROGRAM} --lang zh ${help} WORKING_DIRECTORY ${OUT} OUTPUT_VARIABLE output RESULT_VARIABLE status)
  string(FIND "${output}" "用法：" found)
  if(NOT status STREQUAL "0" OR found EQUAL -1)
    string(APPEND failures "\n--lang zh ${help}: exit status ${status} (expected 0), stdout:\n${output}")
  endif()
endforeach()
if(NOT failures STREQUAL "")
  message(FATAL_ERROR "command lines not refused as they should be:${failures}")
endif()
message(STATUS "every bad command line was refused with status 2, in the language asked for")
