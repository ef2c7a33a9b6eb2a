// Quantities with units, as scenario files and the one-line form write them
// (docs/fault-lab-design.md, "Scenario file"): durations ("300ms", "1.5s"),
// rates ("100MB/s", "1Gbit/s"), sizes ("16KiB"), probabilities and plain
// integers. Shared by both readers so that "200us" means the same thing in
// SOFTRNIC_FAULTS and in a file, and so that both say the same when it is
// wrong.
//
// Every parser takes the bounds the caller documents, returns false on
// anything it does not fully understand (no sign, no exponent, no trailing
// junk, nothing silently clamped), and then sets *error to what is wrong and
// what was expected, without a location: the reader adds that.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace softrnic::faults {

// A duration: a decimal number ("2", "1.5") and a unit ns, us, ms or s, in
// [0, max_ns] once rounded to whole nanoseconds. A bare number is refused
// (is "200" 200 us or 200 ms?), except "0", which means the same in every
// unit.
bool ParseDuration(std::string_view text, uint64_t max_ns, uint64_t* ns, std::string* error);

// A rate in bytes per second: a bare integer is bytes/s; otherwise a number
// and a unit B, KB, MB, GB (powers of 10), KiB, MiB, GiB (powers of 2), or
// bit, Kbit, Mbit, Gbit (bits: divided by 8), each optionally followed by
// "/s" ("100MB" = "100MB/s"). Within [min, max] once rounded to whole bytes.
bool ParseRate(std::string_view text, uint64_t min, uint64_t max, uint64_t* bytes_per_s,
               std::string* error);

// A size in bytes: a bare integer is bytes; otherwise a number and a unit
// B, KB, MB, GB, KiB, MiB, GiB. Within [min, max].
bool ParseSize(std::string_view text, uint64_t min, uint64_t max, uint64_t* bytes,
               std::string* error);

// A probability written as a decimal number in [0, 1] ("0.01", "1", ".5").
bool ParseProbability(std::string_view text, double* probability, std::string* error);

// A whole number, decimal or 0x hexadecimal, in [0, max]. Leading zeros are
// decimal ("010" is ten), unlike strtoull's base 0, which would read octal.
bool ParseUnsigned(std::string_view text, uint64_t max, uint64_t* value, std::string* error);

// `ns` in the largest unit that writes it exactly ("1h", "10s", "300ms"),
// for messages that quote a bound.
std::string DurationText(uint64_t ns);

// `text` fit to be quoted in an error message: control and non-ASCII bytes
// as \xNN, and at most ~60 characters (hostile input may be long).
std::string Quoted(std::string_view text);

}  // namespace softrnic::faults
