# The test tutorial:NN_topic:readme: a tutorial's README.md quotes the
# program's output in blocks that follow a line "<!-- program output -->":
#
#   <!-- program output -->
#   ```text
#         d    var(qᵀk)    var(qᵀk) / d    var(qᵀk / √d)
#   ...
#   ```
#
# Runs the program with --lang en and fails when a block is not found in its
# output, unchanged and in one piece. With -DMODE=update it rewrites each
# block instead: the output's lines from the block's first line on, as many
# as the block has.
#
#   cmake -DPROGRAM=tutorial_05_attention_scoring -DREADME=README.md -DOUT=dir [-DMODE=update] -P check_readme.cmake
cmake_minimum_required(VERSION 3.20)  # script mode: today's policies
execute_process(COMMAND ${PROGRAM} --lang en --out ${OUT}
                OUTPUT_VARIABLE output ERROR_VARIABLE errors RESULT_VARIABLE status)
if(NOT status STREQUAL "0")
  message(FATAL_ERROR "the tutorial failed (exit status ${status}):\n${output}${errors}")
endif()
file(WRITE ${OUT}/output.txt "${output}")
file(READ ${README} readme)
set(marker "<!-- program output -->\n```text\n")
set(rest "${readme}")
set(rewritten "")
set(blocks 0)
set(missing "")
while(TRUE)
  string(FIND "${rest}" "${marker}" at)
  if(at EQUAL -1)
    break()
  endif()
  string(LENGTH "${marker}" marker_length)
  math(EXPR start "${at} + ${marker_length}")
  string(SUBSTRING "${rest}" 0 ${start} before)
  string(SUBSTRING "${rest}" ${start} -1 rest)
  string(FIND "${rest}" "```" end)
  if(end EQUAL -1)
    message(FATAL_ERROR "${README}: a program output block without its closing ```")
  endif()
  string(SUBSTRING "${rest}" 0 ${end} block)  # ends with its last line's newline
  string(SUBSTRING "${rest}" ${end} -1 rest)
  math(EXPR blocks "${blocks} + 1")
  if(MODE STREQUAL "update")
    # the first line of the block, and the number of its lines
    string(FIND "${block}" "\n" first_end)
    string(SUBSTRING "${block}" 0 ${first_end} first_line)
    string(REGEX MATCHALL "\n" newlines "${block}")
    list(LENGTH newlines count)
    string(FIND "${output}" "${first_line}\n" from)
    if(from EQUAL -1)
      message(FATAL_ERROR "${README}: block ${blocks}'s first line is not in the output:\n${first_line}")
    endif()
    string(SUBSTRING "${output}" ${from} -1 tail)
    set(block "")
    foreach(i RANGE 1 ${count})
      string(FIND "${tail}" "\n" nl)
      math(EXPR nl "${nl} + 1")
      string(SUBSTRING "${tail}" 0 ${nl} one)
      string(SUBSTRING "${tail}" ${nl} -1 tail)
      string(APPEND block "${one}")
    endforeach()
  else()
    string(FIND "${output}" "${block}" found)
    if(found EQUAL -1)
      string(APPEND missing "\n--- block ${blocks} of ${README}, not in the output:\n${block}")
    endif()
  endif()
  string(APPEND rewritten "${before}${block}")
endwhile()
string(APPEND rewritten "${rest}")
if(blocks EQUAL 0)
  message(FATAL_ERROR "${README} has no \"<!-- program output -->\" block")
endif()
if(MODE STREQUAL "update")
  file(WRITE ${README} "${rewritten}")
  message(STATUS "rewrote ${blocks} blocks of ${README} from the program's output")
elseif(NOT missing STREQUAL "")
  message(FATAL_ERROR "the README quotes output the program no longer prints (its output: ${OUT}/output.txt; "
                      "-DMODE=update rewrites the blocks):${missing}")
else()
  message(STATUS "all ${blocks} output blocks of ${README} are in the program's output")
endif()
