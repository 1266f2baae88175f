# The test tutorial:NN_topic:languages: runs a tutorial with --lang en and with
# --lang zh, both with --no-prose (only what must not depend on the language:
# the values in the sentences, tensors, table rows, the checks' outcomes),
# and fails when the two outputs or exit statuses differ, or when a check failed.
# Both runs write their pictures to one folder, so that the paths they print agree.
#
#   cmake -DPROGRAM=tutorial_05_attention_scoring -DOUT=dir [-DARGS=--exercise] -P compare_languages.cmake
cmake_minimum_required(VERSION 3.20)  # script mode: today's policies
foreach(lang en zh)
  execute_process(COMMAND ${PROGRAM} ${ARGS} --lang ${lang} --no-prose --out ${OUT}/pictures
                  OUTPUT_VARIABLE output_${lang} ERROR_VARIABLE errors_${lang} RESULT_VARIABLE status_${lang})
  file(WRITE ${OUT}/no-prose-${lang}.txt "${output_${lang}}")
endforeach()
if(NOT "${output_en}" STREQUAL "${output_zh}")
  execute_process(COMMAND diff ${OUT}/no-prose-en.txt ${OUT}/no-prose-zh.txt OUTPUT_VARIABLE difference)
  message(FATAL_ERROR "--lang en and --lang zh print different values:\n${difference}"
                      "(the two outputs: ${OUT}/no-prose-en.txt and ${OUT}/no-prose-zh.txt)")
endif()
if(NOT status_en STREQUAL status_zh)
  message(FATAL_ERROR "exit status ${status_en} with --lang en but ${status_zh} with --lang zh")
endif()
if(NOT status_en STREQUAL "0")
  message(FATAL_ERROR "the tutorial failed (exit status ${status_en}) in both languages:\n${output_en}${errors_en}")
endif()
message(STATUS "the same values and checks in English and Chinese (${OUT}/no-prose-en.txt)")
