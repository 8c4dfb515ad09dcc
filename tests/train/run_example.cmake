# Runs an example program and checks how it ends: cmake -DPROG=path -DARGS="a|b" -DRC=n
# [-DOUT=regex] [-DERR=regex] -P run_example.cmake. ARGS separates arguments with '|'; OUT and
# ERR must match the program's standard output and standard error.
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND "${PROG}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err TIMEOUT 60)
set(fail "")
if(NOT rc STREQUAL "${RC}")
  string(APPEND fail "exit status ${rc}, expected ${RC}\n")
endif()
if(DEFINED OUT AND NOT out MATCHES "${OUT}")
  string(APPEND fail "standard output does not match '${OUT}'\n")
endif()
if(DEFINED ERR AND NOT err MATCHES "${ERR}")
  string(APPEND fail "standard error does not match '${ERR}'\n")
endif()
if(fail)
  message(FATAL_ERROR "${PROG} ${args}:\n${fail}--- stdout:\n${out}--- stderr:\n${err}")
endif()
message(STATUS "${PROG} ${args}: exit ${rc} as expected")
