// The Catch2 (v2) entry point of meridian_tests; the test cases live in the *_test.cc files beside it.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
