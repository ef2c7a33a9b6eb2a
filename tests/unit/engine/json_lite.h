// A strict little JSON reader for tests (RFC 8259: no trailing commas, no
// comments, strings with valid escapes and no raw control characters,
// numbers in JSON's grammar): the trace tests parse what the trace writer
// produced, so a file that a browser would refuse fails here too.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace softrnic::testing::json {

struct Value {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject } type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string text;  // kString: the decoded string; kNumber: its spelling
  std::vector<Value> items;
  std::map<std::string, Value> members;

  const Value* Get(const std::string& key) const {
    const auto it = members.find(key);
    return it == members.end() ? nullptr : &it->second;
  }
  std::string Str(const std::string& key) const {
    const Value* v = Get(key);
    return v != nullptr && v->type == Type::kString ? v->text : std::string();
  }
  double Num(const std::string& key, double otherwise = -1) const {
    const Value* v = Get(key);
    return v != nullptr && v->type == Type::kNumber ? v->number : otherwise;
  }
};

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  // The document, or false with error() saying where it went wrong.
  bool Parse(Value* out) {
    Ws();
    if (!ParseValue(out, 0)) return false;
    Ws();
    if (i_ != s_.size()) return Fail("trailing characters");
    return true;
  }
  const std::string& error() const { return error_; }

 private:
  bool Fail(const char* why) {
    if (error_.empty()) error_ = std::string(why) + " at offset " + std::to_string(i_);
    return false;
  }
  void Ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool Lit(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  bool ParseValue(Value* v, int depth) {
    if (depth > 64) return Fail("nesting too deep");
    if (i_ >= s_.size()) return Fail("unexpected end");
    const char c = s_[i_];
    if (c == '{') return ParseObject(v, depth);
    if (c == '[') return ParseArray(v, depth);
    if (c == '"') {
      v->type = Value::Type::kString;
      return ParseString(&v->text);
    }
    if (Lit("true")) {
      v->type = Value::Type::kBool;
      v->boolean = true;
      return true;
    }
    if (Lit("false")) {
      v->type = Value::Type::kBool;
      return true;
    }
    if (Lit("null")) return true;
    return ParseNumber(v);
  }
  bool ParseObject(Value* v, int depth) {
    v->type = Value::Type::kObject;
    ++i_;
    Ws();
    if (i_ < s_.size() && s_[i_] == '}') {
      ++i_;
      return true;
    }
    for (;;) {
      Ws();
      std::string key;
      if (i_ >= s_.size() || s_[i_] != '"') return Fail("expected a key");
      if (!ParseString(&key)) return false;
      Ws();
      if (i_ >= s_.size() || s_[i_] != ':') return Fail("expected ':'");
      ++i_;
      Ws();
      Value member;
      if (!ParseValue(&member, depth + 1)) return false;
      if (v->members.count(key)) return Fail("duplicate key");
      v->members.emplace(std::move(key), std::move(member));
      Ws();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < s_.size() && s_[i_] == '}') {
        ++i_;
        return true;
      }
      return Fail("expected ',' or '}'");
    }
  }
  bool ParseArray(Value* v, int depth) {
    v->type = Value::Type::kArray;
    ++i_;
    Ws();
    if (i_ < s_.size() && s_[i_] == ']') {
      ++i_;
      return true;
    }
    for (;;) {
      Ws();
      Value item;
      if (!ParseValue(&item, depth + 1)) return false;
      v->items.push_back(std::move(item));
      Ws();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < s_.size() && s_[i_] == ']') {
        ++i_;
        return true;
      }
      return Fail("expected ',' or ']'");
    }
  }
  static void PutUtf8(std::string* out, uint32_t cp) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  bool Hex4(uint32_t* out) {
    if (i_ + 4 > s_.size()) return Fail("short \\u escape");
    *out = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      *out <<= 4;
      if (c >= '0' && c <= '9') *out |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') *out |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') *out |= static_cast<uint32_t>(c - 'A' + 10);
      else return Fail("bad \\u escape");
    }
    return true;
  }
  bool ParseString(std::string* out) {
    ++i_;  // the opening quote
    while (i_ < s_.size()) {
      const unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        ++i_;
        return true;
      }
      if (c < 0x20) return Fail("raw control character in a string");
      if (c != '\\') {
        *out += static_cast<char>(c);
        ++i_;
        continue;
      }
      if (++i_ >= s_.size()) return Fail("unfinished escape");
      const char e = s_[i_++];
      switch (e) {
        case '"': *out += '"'; break;
        case '\\': *out += '\\'; break;
        case '/': *out += '/'; break;
        case 'b': *out += '\b'; break;
        case 'f': *out += '\f'; break;
        case 'n': *out += '\n'; break;
        case 'r': *out += '\r'; break;
        case 't': *out += '\t'; break;
        case 'u': {
          uint32_t cp = 0;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t low = 0;
            if (!Lit("\\u") || !Hex4(&low) || low < 0xDC00 || low > 0xDFFF)
              return Fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return Fail("unpaired surrogate");
          }
          PutUtf8(out, cp);
          break;
        }
        default: return Fail("bad escape");
      }
    }
    return Fail("unterminated string");
  }
  bool ParseNumber(Value* v) {
    const size_t start = i_;
    const auto digit = [&] { return i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9'; };
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    if (!digit()) return Fail("bad value");
    if (s_[i_] == '0') {
      ++i_;
    } else {
      while (digit()) ++i_;
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (!digit()) return Fail("bad fraction");
      while (digit()) ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!digit()) return Fail("bad exponent");
      while (digit()) ++i_;
    }
    v->type = Value::Type::kNumber;
    v->text = std::string(s_.substr(start, i_ - start));
    v->number = std::strtod(v->text.c_str(), nullptr);
    return true;
  }

  std::string_view s_;
  size_t i_ = 0;
  std::string error_;
};

}  // namespace softrnic::testing::json
