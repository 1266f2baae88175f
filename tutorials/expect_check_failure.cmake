# The test tutorial:NN_topic:fault:NAME: runs a tutorial with
# --inject-fault NAME, which makes a step compute something deliberately
# wrong, and requires the check whose English description starts with CHECK
# to be among the failed ones: the check can fail, so it tests something.
#
#   cmake -DPROGRAM=tutorial_05_attention_scoring -DFAULT=additive-ignores-keys \
#         "-DCHECK=the output equals" -DOUT=dir -P expect_check_failure.cmake
cmake_minimum_required(VERSION 3.20)  # script mode: today's policies
execute_process(COMMAND ${PROGRAM} --lang en --inject-fault ${FAULT} --out ${OUT}
                OUTPUT_VARIABLE output ERROR_VARIABLE errors RESULT_VARIABLE status)
string(FIND "${output}" "no step has that fault" unknown)
if(NOT unknown EQUAL -1)
  message(FATAL_ERROR "no step of the tutorial asks for the fault '${FAULT}':\n${output}${errors}")
endif()
if(status STREQUAL "0")
  message(FATAL_ERROR "every check passed although the fault '${FAULT}' was injected:\n${output}")
endif()
# the summary names each failed check as "  ✗ [step] what"
string(FIND "${output}" "] ${CHECK}" named)
if(named EQUAL -1)
  message(FATAL_ERROR "with the fault '${FAULT}' the check '${CHECK}' did not fail:\n${output}${errors}")
endif()
message(STATUS "the fault '${FAULT}' makes the check '${CHECK}' fail, as it should")
