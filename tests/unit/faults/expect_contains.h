// EXPECT_CONTAINS(text, part): the unit tests link GoogleTest without
// GoogleMock, so no HasSubstr; this prints both strings on a failure.
#pragma once

#include <gtest/gtest.h>

#include <string>

#define EXPECT_CONTAINS(text, part)                                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos)                 \
      << "expected \"" << (text) << "\"\n to contain \"" << (part) << "\""
