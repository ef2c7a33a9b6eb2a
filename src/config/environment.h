// Reading the variables of the table (variables.h): the only code in src/
// that calls getenv for a SOFTRNIC_* name (a ctest checks that).
//
// An Environment is a snapshot: FromProcess() reads every variable of the
// table once; tests build one from a map instead of calling setenv. The
// typed getters check a value against the table the same way for every
// variable: unset or empty means the table's default; a value that is not
// accepted prints one line on stderr,
//   softrnic: ignoring SOFTRNIC_MTU=1500 (accepted: 256|512|1024|2048|4096)
// and the default is used. Asking for a name that is not in the table is a
// programming error (aborts), so the table cannot fall behind the readers.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "config/variables.h"

namespace softrnic::config {

class Environment {
 public:
  using Values = std::map<std::string, std::string, std::less<>>;

  // Every variable of the table as the process environment has it now.
  static Environment FromProcess();
  // Exactly these settings (name -> value); the others are unset.
  explicit Environment(Values values = {});

  // The value as set, or null if unset or empty.
  const char* Raw(std::string_view name) const;

  // The getters below return the table's default when the variable is
  // unset, empty, or not accepted (then with the stderr line).
  bool Flag(std::string_view name) const;                   // Kind::kFlag
  std::string Choice(std::string_view name) const;          // Kind::kChoice
  long Integer(std::string_view name) const;                // Kind::kInteger
  double Number(std::string_view name) const;               // Kind::kNumber
  std::string Text(std::string_view name) const;            // Kind::kText
  // A choice that must not fall back (SOFTRNIC_TRANSPORT): false, and
  // *error says which value is wrong and what is accepted.
  bool StrictChoice(std::string_view name, std::string* out, std::string* error) const;

  // The line printed for a value that is not accepted (without newline).
  static std::string Rejection(const Variable& v, std::string_view value);

 private:
  Values values_;
};

}  // namespace softrnic::config
