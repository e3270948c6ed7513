// Tests of the CSV reader (csv.h): records and values parsed from hand-written inputs, exact error
// messages with line and column for each kind of malformed input, and the UTF-8 validator against
// a naive decoder (exhaustively for short sequences, on random bytes for the rest).
//
// Random values come from std::mt19937_64 (whose output the standard fixes) with fixed seeds.

#include "graph/csv.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace zipg::graph {
namespace {

using Records = std::vector<std::vector<std::string>>;

// All records of `text`, or the error.
StatusOr<Records> Parse(std::string_view text) {
  CsvReader reader("t.csv", text);
  Records records;
  std::vector<CsvField> fields;
  while (true) {
    Status s = reader.ReadRecord(&fields);
    if (!s.ok()) return s;
    if (fields.empty()) break;
    std::vector<std::string> record;
    for (const CsvField& f : fields) record.emplace_back(f.value);
    records.push_back(std::move(record));
  }
  return records;
}

// The error message for `text`, or "OK".
std::string ErrorOf(std::string_view text) {
  StatusOr<Records> r = Parse(text);
  if (r.ok()) return "OK";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

// Parses `text` and expects `want`.
void ExpectRecords(std::string_view text, const Records& want) {
  StatusOr<Records> r = Parse(text);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, want);
}

TEST(CsvReader, PlainRecords) {
  ExpectRecords("a,b,c\n1,2,3\n", {{"a", "b", "c"}, {"1", "2", "3"}});
  ExpectRecords("a,b\n1,2", {{"a", "b"}, {"1", "2"}});  // no final line ending
  ExpectRecords("a,b\r\n1,2\r\n", {{"a", "b"}, {"1", "2"}});
  ExpectRecords("a,b\r\n1,2\n3,4\r\n", {{"a", "b"}, {"1", "2"}, {"3", "4"}});  // mixed endings
  ExpectRecords("x", {{"x"}});
  ExpectRecords(" a , b ", {{" a ", " b "}});  // spaces are data
}

TEST(CsvReader, EmptyFields) {
  ExpectRecords(",,\n", {{"", "", ""}});
  ExpectRecords("a,\n", {{"a", ""}});
  ExpectRecords("a,", {{"a", ""}});
  ExpectRecords(",a", {{"", "a"}});
  ExpectRecords("\"\",\"\"\n", {{"", ""}});
  ExpectRecords("\"\"", {{""}});
}

TEST(CsvReader, BlankLinesHoldNoRecord) {
  ExpectRecords("", {});
  ExpectRecords("\n\n", {});
  ExpectRecords("\r\n", {});
  ExpectRecords("\n\na\n\r\n\nb\n\n", {{"a"}, {"b"}});
  ExpectRecords("a\n\"\"\nb", {{"a"}, {""}, {"b"}});
}

TEST(CsvReader, ByteOrderMarkIsSkipped) {
  ExpectRecords("\xEF\xBB\xBFid,name\n1,x\n", {{"id", "name"}, {"1", "x"}});
  ExpectRecords("\xEF\xBB\xBF", {});
  // Only at the very start: later it is the character U+FEFF, kept as data.
  ExpectRecords(
      "a\n\xEF\xBB\xBF"
      "b",
      {{"a"},
       {"\xEF\xBB\xBF"
        "b"}});
  CsvReader reader("t.csv", "\xEF\xBB\xBFid");
  std::vector<CsvField> fields;
  ASSERT_TRUE(reader.ReadRecord(&fields).ok());
  ASSERT_EQ(fields.size(), 1u);
  EXPECT_EQ(fields[0].offset, 3u);
  EXPECT_EQ(PositionOf(reader.text(), fields[0].offset), (TextPosition{1, 1}));
}

TEST(CsvReader, QuotedFields) {
  ExpectRecords("\"a,b\",\"say \"\"hi\"\"\",\"line1\nline2\",\"cr\rlf\r\n\",\"\"\"\"\n",
                {{"a,b", "say \"hi\"", "line1\nline2", "cr\rlf\r\n", "\""}});
  ExpectRecords("\"\"\"a\"\"\",b", {{"\"a\"", "b"}});
  ExpectRecords("\"a\"\r\n\"b\"", {{"a"}, {"b"}});
  ExpectRecords("\"a\",", {{"a", ""}});
  // Several unescaped values in one record (their storage is shared) stay intact.
  ExpectRecords("\"1\"\"\",x,\"2\"\"\"\"\",\"3\"\"\"\n\"4\"\"\"",
                {{"1\"", "x", "2\"\"", "3\""}, {"4\""}});
  std::string long_value(10000, 'v');
  ExpectRecords("\"\"\"" + long_value + "\"\"\",\"\"\"\"", {{"\"" + long_value + "\"", "\""}});
}

TEST(CsvReader, ValuesAreByteExact) {
  const std::string nul("a\0b", 3);
  ExpectRecords(nul + ",\t\x01\x7F,\xEF\xBF\xBD,\xF0\x9F\x99\x82,\xF4\x8F\xBF\xBF,\xE6\x97\xA5",
                {{nul, "\t\x01\x7F", "\xEF\xBF\xBD", "\xF0\x9F\x99\x82", "\xF4\x8F\xBF\xBF",
                  "\xE6\x97\xA5"}});
  ExpectRecords("\"\xF0\x9F\x99\x82,\"\"\n\"", {{"\xF0\x9F\x99\x82,\"\n"}});
}

TEST(CsvReader, FieldOffsetsAndPositions) {
  // Columns count characters: é is two bytes but one column.
  const std::string text = "ab,\"c\nd\",\xC3\xA9,z\n\n  q";
  CsvReader reader("t.csv", text);
  std::vector<CsvField> fields;
  ASSERT_TRUE(reader.ReadRecord(&fields).ok());
  ASSERT_EQ(fields.size(), 4u);
  std::vector<TextPosition> want = {{1, 1}, {1, 4}, {2, 4}, {2, 6}};
  std::vector<size_t> want_offsets = {0, 3, 9, 12};
  for (size_t i = 0; i < fields.size(); ++i) {
    EXPECT_EQ(fields[i].offset, want_offsets[i]) << i;
    EXPECT_EQ(PositionOf(text, fields[i].offset), want[i]) << i;
  }
  EXPECT_EQ(reader.record_end(), 13u);
  EXPECT_EQ(reader.offset(), 14u);
  ASSERT_TRUE(reader.ReadRecord(&fields).ok());
  ASSERT_EQ(fields.size(), 1u);
  EXPECT_EQ(fields[0].value, "  q");
  EXPECT_EQ(PositionOf(text, fields[0].offset), (TextPosition{4, 1}));
  EXPECT_EQ(reader.record_end(), text.size());
  ASSERT_TRUE(reader.ReadRecord(&fields).ok());
  EXPECT_TRUE(fields.empty());
  EXPECT_EQ(reader.offset(), text.size());
}

TEST(CsvReader, PositionOf) {
  EXPECT_EQ(PositionOf("", 0), (TextPosition{1, 1}));
  EXPECT_EQ(PositionOf("abc", 2), (TextPosition{1, 3}));
  EXPECT_EQ(PositionOf("abc", 99), (TextPosition{1, 4}));  // clamped to the end
  EXPECT_EQ(PositionOf("a\nb\r\nc", 5), (TextPosition{3, 1}));
  EXPECT_EQ(PositionOf("a\nb\r\nc", 3), (TextPosition{2, 2}));  // at the CR
  EXPECT_EQ(PositionOf("\xEF\xBB\xBF"
                       "ab",
                       4),
            (TextPosition{1, 2}));
  EXPECT_EQ(PositionOf("\xF0\x9F\x99\x82\xF0\x9F\x99\x82x", 8), (TextPosition{1, 3}));
}

TEST(CsvReader, UnterminatedQuoteNamesWhereItOpened) {
  EXPECT_EQ(ErrorOf("a,b\n1,\"xy\nz\n"),
            "t.csv:2:3: unterminated quoted field: the quote opened here is never closed");
  EXPECT_EQ(ErrorOf("\""),
            "t.csv:1:1: unterminated quoted field: the quote opened here is never closed");
  EXPECT_EQ(ErrorOf("\"a\"\"\n"),  // the doubled quote is a quote inside the value
            "t.csv:1:1: unterminated quoted field: the quote opened here is never closed");
}

TEST(CsvReader, QuoteInsideUnquotedField) {
  const std::string what =
      ": unexpected quote in an unquoted field (a field holding quotes must be quoted and its "
      "quotes doubled)";
  EXPECT_EQ(ErrorOf("a,b\"c\n"), "t.csv:1:4" + what);
  EXPECT_EQ(ErrorOf("x\n\xC3\xA9\xC3\xA9\"\n"), "t.csv:2:3" + what);
  EXPECT_EQ(ErrorOf("a \"b\"\n"), "t.csv:1:3" + what);
}

TEST(CsvReader, GarbageAfterClosingQuote) {
  const std::string what = ": expected a comma or a line end after the closing quote, found ";
  EXPECT_EQ(ErrorOf("\"a\"b,c"), "t.csv:1:4" + what + "\"b\"");
  EXPECT_EQ(ErrorOf("x,\"a\" \n"), "t.csv:1:6" + what + "\" \"");
  EXPECT_EQ(ErrorOf("\"a\n\"\xC3\xA9"), "t.csv:2:2" + what + "\"\xC3\xA9\"");
  EXPECT_EQ(ErrorOf("\"a\"\"\"b\""), "t.csv:1:6" + what + "\"b\"");  // "a"""b"
  EXPECT_EQ(ErrorOf("\"a\"\xFF"), "t.csv:1:4" + what + "\"\\xFF\"");
}

TEST(CsvReader, CarriageReturnWithoutLineFeed) {
  const std::string what =
      ": expected a line feed after the carriage return (a field holding a carriage return must "
      "be quoted)";
  EXPECT_EQ(ErrorOf("a\rb\n"), "t.csv:1:2" + what);
  EXPECT_EQ(ErrorOf("a,b\r"), "t.csv:1:4" + what);
  EXPECT_EQ(ErrorOf("\"a\"\rb"), "t.csv:1:4" + what);
  EXPECT_EQ(ErrorOf("x\n\r\r\n"), "t.csv:2:1" + what);
}

TEST(CsvReader, InvalidUtf8PointsAtTheSequence) {
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"ab,c\x80", "t.csv:1:5: invalid UTF-8: unexpected continuation byte 0x80"},
      {"\xC0\xAF", "t.csv:1:1: invalid UTF-8: byte 0xC0 never appears in UTF-8 (overlong)"},
      {"\xC1\xBF", "t.csv:1:1: invalid UTF-8: byte 0xC1 never appears in UTF-8 (overlong)"},
      {"\xF5\x80\x80\x80", "t.csv:1:1: invalid UTF-8: byte 0xF5 never appears in UTF-8"},
      {"\xFF", "t.csv:1:1: invalid UTF-8: byte 0xFF never appears in UTF-8"},
      {"a\n\xC3\xA9\xE0\x80\x80",
       "t.csv:2:2: invalid UTF-8: bytes 0xE0 0x80 start an overlong encoding"},
      {"\xF0\x8F\xBF\xBF", "t.csv:1:1: invalid UTF-8: bytes 0xF0 0x8F start an overlong encoding"},
      {"\"ok\",\"\xED\xA0\x80\"",
       "t.csv:1:7: invalid UTF-8: bytes 0xED 0xA0 start a UTF-16 surrogate (U+D800 to U+DFFF)"},
      {"\xED\xBF\xBF",
       "t.csv:1:1: invalid UTF-8: bytes 0xED 0xBF start a UTF-16 surrogate (U+D800 to U+DFFF)"},
      {"\xF4\x90\x80\x80",
       "t.csv:1:1: invalid UTF-8: bytes 0xF4 0x90 start a code point above U+10FFFF"},
      {"x,\xE2\x82",
       "t.csv:1:3: invalid UTF-8: byte 0xE2 starts a 3-byte sequence but the input ends after 2 "
       "byte(s)"},
      {"\xE2\x41",
       "t.csv:1:1: invalid UTF-8: byte 0xE2 starts a 3-byte sequence but is followed by 0x41"},
      {"\xF0\x9F\x99,",
       "t.csv:1:1: invalid UTF-8: byte 0xF0 starts a 4-byte sequence but is followed by 0x2C"},
      {"\xC3",
       "t.csv:1:1: invalid UTF-8: byte 0xC3 starts a 2-byte sequence but the input ends "
       "after 1 byte(s)"},
      {"\"\n\n  \xC3\xA9\xC3\"",  // inside a quoted field, on its third line
       "t.csv:3:4: invalid UTF-8: byte 0xC3 starts a 2-byte sequence but is followed by 0x22"},
  };
  for (const Case& c : cases) EXPECT_EQ(ErrorOf(c.text), c.message) << QuoteForMessage(c.text);
}

TEST(QuoteForMessage, EscapesAndCuts) {
  EXPECT_EQ(QuoteForMessage("abc"), "\"abc\"");
  EXPECT_EQ(QuoteForMessage(""), "\"\"");
  EXPECT_EQ(QuoteForMessage("a\"b\\c\n\r\t\x01\x7F"), "\"a\\\"b\\\\c\\n\\r\\t\\x01\\x7F\"");
  EXPECT_EQ(QuoteForMessage(std::string("\0", 1)), "\"\\x00\"");
  EXPECT_EQ(QuoteForMessage("\xC3\xA9\xFF\xE2\x82"), "\"\xC3\xA9\\xFF\\xE2\\x82\"");
  const std::string x63(63, 'x');
  EXPECT_EQ(QuoteForMessage(x63 + "xx" + x63), "\"" + x63 + "x\"... (128 bytes)");
  // Cut at a character boundary: the two-byte é would end past byte 64.
  EXPECT_EQ(QuoteForMessage(x63 + "\xC3\xA9"), "\"" + x63 + "\"... (65 bytes)");
  EXPECT_EQ(QuoteForMessage("abcdef", 3), "\"abc\"... (6 bytes)");
}

// ------------------------------------------------------------------------------------------------
// UTF-8 against a naive decoder.

// The length of the valid UTF-8 sequence at s[0], or 0: decodes the code point from the bit
// patterns and checks it against the shortest form, the surrogates and U+10FFFF.
size_t NaiveUtf8Length(std::string_view s) {
  const uint8_t b0 = static_cast<uint8_t>(s[0]);
  size_t n;
  uint32_t cp, min;
  if (b0 < 0x80) return 1;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

size_t Length(std::string_view s) { return Utf8SequenceLength(s.data(), s.data() + s.size()); }

TEST(Utf8, ShortSequencesExhaustively) {
  for (int a = 0; a < 256; ++a) {
    const std::string one(1, static_cast<char>(a));
    ASSERT_EQ(Length(one), NaiveUtf8Length(one)) << a;
    for (int b = 0; b < 256; ++b) {
      const std::string two = one + static_cast<char>(b);
      ASSERT_EQ(Length(two), NaiveUtf8Length(two)) << a << " " << b;
      if (a < 0xE0) continue;
      for (int c : {0x00, 0x2C, 0x7F, 0x80, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF}) {
        const std::string three = two + static_cast<char>(c);
        ASSERT_EQ(Length(three), NaiveUtf8Length(three)) << a << " " << b << " " << c;
        for (int d : {0x41, 0x80, 0xBF, 0xC0}) {
          const std::string four = three + static_cast<char>(d);
          ASSERT_EQ(Length(four), NaiveUtf8Length(four)) << a << " " << b << " " << c << " " << d;
        }
      }
    }
  }
}

std::string EncodeUtf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

TEST(Utf8, EveryCodePointButTheSurrogates) {
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    const std::string s = EncodeUtf8(cp);
    const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
    ASSERT_EQ(Length(s), surrogate ? 0 : s.size()) << std::hex << cp;
  }
  // Overlong forms of a few code points.
  EXPECT_EQ(Length("\xC0\x80"), 0u);              // U+0000 in two bytes
  EXPECT_EQ(Length("\xE0\x81\xBF"), 0u);          // U+007F in three bytes
  EXPECT_EQ(Length("\xE0\x9F\xBF"), 0u);          // U+07FF in three bytes
  EXPECT_EQ(Length("\xF0\x8F\xBF\xBF"), 0u);      // U+FFFF in four bytes
  EXPECT_EQ(Length("\xF8\x88\x80\x80\x80"), 0u);  // five-byte forms are gone
}

// Random byte strings drawn mostly from lead and continuation bytes: the reader accepts exactly
// those the naive decoder accepts, and an error points at the first invalid sequence.
TEST(Utf8, ReaderAgreesWithNaiveDecoderOnRandomBytes) {
  std::mt19937_64 rng(20240601);
  const std::string alphabet_ascii = "abc \t";
  int invalid = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s;
    const size_t len = 1 + rng() % 12;
    for (size_t i = 0; i < len; ++i) {
      const uint64_t r = rng() % 8;
      if (r == 0) {
        s += alphabet_ascii[rng() % alphabet_ascii.size()];
      } else if (r < 4) {
        s += static_cast<char>(0x80 + rng() % 0x40);  // continuation
      } else {
        s += static_cast<char>(0xC0 + rng() % 0x40);  // lead (or never valid)
      }
    }
    size_t bad = std::string::npos;
    for (size_t i = 0; i < s.size();) {
      const size_t n = NaiveUtf8Length(std::string_view(s).substr(i));
      if (n == 0) {
        bad = i;
        break;
      }
      i += n;
    }
    const std::string error = ErrorOf(s);
    if (bad == std::string::npos) {
      ASSERT_EQ(error, "OK") << QuoteForMessage(s);
      ASSERT_EQ(*Parse(s), (Records{{s}}));
    } else {
      ++invalid;
      const TextPosition pos = PositionOf(s, bad);
      const std::string prefix = "t.csv:1:" + std::to_string(pos.column) + ": invalid UTF-8: ";
      ASSERT_EQ(error.substr(0, prefix.size()), prefix) << QuoteForMessage(s) << " " << error;
    }
  }
  EXPECT_GT(invalid, 1000);
  EXPECT_LT(invalid, 19900);
}

}  // namespace
}  // namespace zipg::graph
