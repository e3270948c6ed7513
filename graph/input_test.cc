// Tests of the input loaders (input.h): exact parsed graphs for hand-written nodes CSV, edges CSV
// and SNAP files; the exact "PATH:LINE:COLUMN: ..." message of every kind of malformed input;
// that a failed load leaves the graph unchanged; progress reports; and randomized round trips
// (values with quotes, commas, line breaks and any UTF-8, written with RFC 4180 quoting, loaded
// back and compared with what was written).
//
// Random values come from std::mt19937_64 (whose output the standard fixes) with fixed seeds.

#include "graph/input.h"
#include "util/scratch_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace zipg::graph {

bool operator==(const InputNode& a, const InputNode& b) {
  return a.id == b.id && a.properties == b.properties;
}
bool operator==(const InputEdge& a, const InputEdge& b) {
  return a.src == b.src && a.dst == b.dst && a.type == b.type && a.timestamp == b.timestamp &&
         a.properties == b.properties;
}
bool operator==(const InputGraph& a, const InputGraph& b) {
  return a.node_property_names == b.node_property_names &&
         a.edge_property_names == b.edge_property_names && a.nodes == b.nodes &&
         a.edges == b.edges && a.raw_bytes == b.raw_bytes;
}
void PrintTo(const InputNode& n, std::ostream* os) {
  *os << "{" << n.id;
  for (const auto& [i, v] : n.properties) *os << ", " << i << "=" << ::testing::PrintToString(v);
  *os << "}";
}
void PrintTo(const InputEdge& e, std::ostream* os) {
  *os << "{" << e.src << "->" << e.dst << " type " << e.type << " ts " << e.timestamp;
  for (const auto& [i, v] : e.properties) *os << ", " << i << "=" << ::testing::PrintToString(v);
  *os << "}";
}

namespace {

using zipg::ScratchDir;

using Loader = Status (*)(const std::string&, InputGraph*, const LoadProgress&);

class InputTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dir_.ok()); }

  // Loads `contents` (as file `name`) into `graph` with `load`.
  Status Load(Loader load, const std::string& name, const std::string& contents,
              InputGraph* graph) {
    return load(dir_.Write(name, contents), graph, {});
  }
  // The error of loading `contents` into an empty graph, with the directory cut from the path;
  // checks that it is INVALID_ARGUMENT and that the graph did not change.
  std::string ErrorOf(Loader load, const std::string& name, const std::string& contents) {
    InputGraph graph;
    graph.raw_bytes = 7;
    if (load == &LoadSnapEdges) graph.edges.push_back({1, 2, 0, 0, {}});
    const InputGraph before = graph;
    Status s = Load(load, name, contents, &graph);
    if (s.ok()) return "OK";
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_TRUE(graph == before) << "a failed load changed the graph";
    const std::string prefix = dir_.File("");
    EXPECT_EQ(s.message().substr(0, prefix.size()), prefix) << s.message();
    return s.message().substr(std::min(prefix.size(), s.message().size()));
  }
  std::string NodesError(const std::string& contents) {
    return ErrorOf(&LoadNodesCsv, "nodes.csv", contents);
  }
  std::string EdgesError(const std::string& contents) {
    return ErrorOf(&LoadEdgesCsv, "edges.csv", contents);
  }
  std::string SnapError(const std::string& contents) {
    return ErrorOf(&LoadSnapEdges, "edges.txt", contents);
  }

  ScratchDir dir_;
};

// ------------------------------------------------------------------------------------------------
// Well-formed input.

TEST_F(InputTest, NodesCsv) {
  const std::string text =
      "id,name,bio,age\n"
      "1,alice,\"likes \"\"quotes\"\", commas\nand lines\",30\n"
      "2,,,\n"
      "7,\xE6\x97\xA5\xE6\x9C\xAC,\xF0\x9F\x99\x82 \xEF\xBF\xBD,\"\"\r\n"
      "0,\"\",\" \",-5";
  InputGraph graph;
  ASSERT_TRUE(Load(&LoadNodesCsv, "nodes.csv", text, &graph).ok());
  EXPECT_EQ(graph.node_property_names, (std::vector<std::string>{"name", "bio", "age"}));
  const std::vector<InputNode> want = {
      {1, {{0, "alice"}, {1, "likes \"quotes\", commas\nand lines"}, {2, "30"}}},
      {2, {}},
      {7, {{0, "\xE6\x97\xA5\xE6\x9C\xAC"}, {1, "\xF0\x9F\x99\x82 \xEF\xBF\xBD"}}},
      {0, {{1, " "}, {2, "-5"}}},
  };
  EXPECT_EQ(graph.nodes, want);
  EXPECT_TRUE(graph.edges.empty());
  EXPECT_TRUE(graph.edge_property_names.empty());
  EXPECT_EQ(graph.raw_bytes, text.size());
}

TEST_F(InputTest, NodesCsvWithOnlyIds) {
  InputGraph graph;
  ASSERT_TRUE(Load(&LoadNodesCsv, "n.csv",
                   "\xEF\xBB\xBFid\r\n5\r\n\r\n\"3\"\r\n9223372036854775807\r\n\n", &graph)
                  .ok());
  EXPECT_TRUE(graph.node_property_names.empty());
  EXPECT_EQ(graph.nodes, (std::vector<InputNode>{{5, {}}, {3, {}}, {INT64_MAX, {}}}));
}

TEST_F(InputTest, NodesCsvWithOnlyAHeader) {
  InputGraph graph;
  ASSERT_TRUE(Load(&LoadNodesCsv, "n.csv", "id,a", &graph).ok());
  EXPECT_EQ(graph.node_property_names, (std::vector<std::string>{"a"}));
  EXPECT_TRUE(graph.nodes.empty());
}

TEST_F(InputTest, EdgesCsv) {
  const std::string text =
      "src,dst,type,timestamp,weight,note\n"
      "1,2,0,100,0.5,\"a,b\"\n"
      "1,2,0,100,,\n"  // repeats are kept
      "3,0,4,-9223372036854775808,x,\n"
      "0,9223372036854775807,9223372036854775807,9223372036854775807,,\"\"\"\"\n"
      "5,6,1,-0,\"\",\"\r\n\"";
  InputGraph graph;
  graph.raw_bytes = 10;
  ASSERT_TRUE(Load(&LoadEdgesCsv, "edges.csv", text, &graph).ok());
  EXPECT_EQ(graph.edge_property_names, (std::vector<std::string>{"weight", "note"}));
  const std::vector<InputEdge> want = {
      {1, 2, 0, 100, {{0, "0.5"}, {1, "a,b"}}},
      {1, 2, 0, 100, {}},
      {3, 0, 4, INT64_MIN, {{0, "x"}}},
      {0, INT64_MAX, INT64_MAX, INT64_MAX, {{1, "\""}}},
      {5, 6, 1, 0, {{1, "\r\n"}}},
  };
  EXPECT_EQ(graph.edges, want);
  EXPECT_EQ(graph.raw_bytes, 10 + text.size());
}

TEST_F(InputTest, EdgesCsvWithoutProperties) {
  InputGraph graph;
  ASSERT_TRUE(Load(&LoadEdgesCsv, "e.csv", "src,dst,type,timestamp\n1,2,3,4\n", &graph).ok());
  EXPECT_EQ(graph.edges, (std::vector<InputEdge>{{1, 2, 3, 4, {}}}));
  // Without property names a second edges file may follow; its edges are appended.
  ASSERT_TRUE(Load(&LoadEdgesCsv, "e2.csv", "src,dst,type,timestamp\n5,6,7,8", &graph).ok());
  EXPECT_EQ(graph.edges, (std::vector<InputEdge>{{1, 2, 3, 4, {}}, {5, 6, 7, 8, {}}}));
}

TEST_F(InputTest, SnapEdges) {
  const std::string text =
      "# Directed graph: web-Example.txt\n"
      "# FromNodeId\tToNodeId\n"
      "0\t1\n"
      "\n"
      "  3   4  \r\n"
      "\t \n"
      "   # indented comment, 1 2 3\n"
      "9223372036854775807 0\r\n"
      "5\t\t6";
  InputGraph graph;
  graph.edges.push_back({7, 8, 1, 2, {{0, "kept"}}});
  graph.raw_bytes = 3;
  ASSERT_TRUE(Load(&LoadSnapEdges, "web.txt", text, &graph).ok());
  const std::vector<InputEdge> want = {
      {7, 8, 1, 2, {{0, "kept"}}}, {0, 1, 0, 0, {}}, {3, 4, 0, 0, {}},
      {INT64_MAX, 0, 0, 0, {}},    {5, 6, 0, 0, {}},
  };
  EXPECT_EQ(graph.edges, want);
  EXPECT_EQ(graph.raw_bytes, 3 + text.size());
  EXPECT_TRUE(graph.nodes.empty());
}

TEST_F(InputTest, SnapEdgesEmptyAndCommentOnly) {
  InputGraph graph;
  ASSERT_TRUE(Load(&LoadSnapEdges, "a.txt", "", &graph).ok());
  ASSERT_TRUE(Load(&LoadSnapEdges, "b.txt", "# nothing\n\n# here", &graph).ok());
  ASSERT_TRUE(Load(&LoadSnapEdges, "c.txt",
                   "\xEF\xBB\xBF"
                   "1 2\n",
                   &graph)
                  .ok());
  EXPECT_EQ(graph.edges, (std::vector<InputEdge>{{1, 2, 0, 0, {}}}));
  EXPECT_EQ(graph.raw_bytes, 17u + 7u);
}

// ------------------------------------------------------------------------------------------------
// Malformed input: one test per kind, exact messages.

TEST_F(InputTest, NodesMissingHeader) {
  EXPECT_EQ(NodesError(""),
            "nodes.csv:1:1: expected a header line id,<property>,..., found an empty file");
  EXPECT_EQ(NodesError("\xEF\xBB\xBF"),
            "nodes.csv:1:1: expected a header line id,<property>,..., found an empty file");
  EXPECT_EQ(NodesError("\n\r\n\n"),
            "nodes.csv:4:1: expected a header line id,<property>,..., found only blank lines");
}

TEST_F(InputTest, NodesBadHeader) {
  EXPECT_EQ(NodesError("name,id\nx,1\n"),
            "nodes.csv:1:1: expected the header's first column to be \"id\", found \"name\"");
  EXPECT_EQ(NodesError("1,alice\n"),
            "nodes.csv:1:1: expected the header's first column to be \"id\", found \"1\"");
  EXPECT_EQ(NodesError("ID,name\n"),
            "nodes.csv:1:1: expected the header's first column to be \"id\", found \"ID\"");
  EXPECT_EQ(NodesError("\xEF\xBB\xBF id,name\n"),
            "nodes.csv:1:1: expected the header's first column to be \"id\", found \" id\"");
}

TEST_F(InputTest, NodesEmptyOrDuplicatePropertyName) {
  EXPECT_EQ(NodesError("id,,age\n1,2,3\n"),
            "nodes.csv:1:4: expected a property name in header column 2, found an empty one");
  EXPECT_EQ(NodesError("id,name,\n"),
            "nodes.csv:1:9: expected a property name in header column 3, found an empty one");
  EXPECT_EQ(NodesError("id,name,\"\"\n"),
            "nodes.csv:1:9: expected a property name in header column 3, found an empty one");
  EXPECT_EQ(NodesError("id,name,age,\"name\"\n"),
            "nodes.csv:1:13: duplicate column name \"name\" (also column 2)");
  EXPECT_EQ(NodesError("id,name,id\n"),
            "nodes.csv:1:9: duplicate column name \"id\" (also column 1)");
}

TEST_F(InputTest, NodesWrongFieldCount) {
  // Too few: at the end of the row; too many: at the first extra field.
  EXPECT_EQ(NodesError("id,name,age\n1,a,2\n2,b\n"),
            "nodes.csv:3:4: expected 3 fields as in the header, found 2");
  EXPECT_EQ(NodesError("id,name,age\r\n1,a,2,x,y\r\n"),
            "nodes.csv:2:7: expected 3 fields as in the header, found 5");
  EXPECT_EQ(NodesError("id,name\n1,\"a\nb\"\n2\n"),
            "nodes.csv:4:2: expected 2 fields as in the header, found 1");
  EXPECT_EQ(NodesError("id\n1,\n"), "nodes.csv:2:3: expected 1 fields as in the header, found 2");
}

TEST_F(InputTest, NodesBadId) {
  const std::string what = "expected an integer node id >= 0, found ";
  EXPECT_EQ(NodesError("id,name\n1,a\nabc,b\n"), "nodes.csv:3:1: " + what + "\"abc\"");
  EXPECT_EQ(NodesError("id,name\n-1,a\n"), "nodes.csv:2:1: " + what + "\"-1\"");
  EXPECT_EQ(NodesError("id,name\n+1,a\n"), "nodes.csv:2:1: " + what + "\"+1\"");
  EXPECT_EQ(NodesError("id,name\n 1,a\n"), "nodes.csv:2:1: " + what + "\" 1\"");
  EXPECT_EQ(NodesError("id,name\n1 ,a\n"), "nodes.csv:2:1: " + what + "\"1 \"");
  EXPECT_EQ(NodesError("id,name\n,a\n"), "nodes.csv:2:1: " + what + "\"\"");
  EXPECT_EQ(NodesError("id,name\n\"\",a\n"), "nodes.csv:2:1: " + what + "\"\"");
  EXPECT_EQ(NodesError("id,name\n1.0,a\n"), "nodes.csv:2:1: " + what + "\"1.0\"");
  EXPECT_EQ(NodesError("id,name\n0x10,a\n"), "nodes.csv:2:1: " + what + "\"0x10\"");
  EXPECT_EQ(NodesError("id,name\n9223372036854775808,a\n"),
            "nodes.csv:2:1: " + what + "\"9223372036854775808\" (out of the int64 range)");
  EXPECT_EQ(NodesError("id,name\n99999999999999999999999,a\n"),
            "nodes.csv:2:1: " + what + "\"99999999999999999999999\" (out of the int64 range)");
  EXPECT_EQ(NodesError("id\n\"1\n\"\n"), "nodes.csv:2:1: " + what + "\"1\\n\"");
}

TEST_F(InputTest, NodesDuplicateIdNamesBothLines) {
  EXPECT_EQ(NodesError("id,bio\n1,\"a\nb\"\n2,x\n1,y\n"),
            "nodes.csv:5:1: duplicate node id 1 (first defined on line 2)");
  // Ids out of order (the hash set's path).
  EXPECT_EQ(NodesError("id\n5\n3\n9\n4\n3\n"),
            "nodes.csv:6:1: duplicate node id 3 (first defined on line 3)");
  EXPECT_EQ(NodesError("id\n5\n5\n"),
            "nodes.csv:3:1: duplicate node id 5 (first defined on line 2)");
  // An error further on is not reported before the duplicate.
  EXPECT_EQ(NodesError("id\n2\n1\n2\nx\n"),
            "nodes.csv:4:1: duplicate node id 2 (first defined on line 2)");
}

TEST_F(InputTest, NodesDuplicateIdAmongManyShuffledIds) {
  std::mt19937_64 rng(7);
  std::vector<int64_t> ids(50000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i) * 1000003;
  std::shuffle(ids.begin(), ids.end(), rng);
  const size_t first = 20000 + rng() % 10000;
  const size_t again = 40000 + rng() % 10000;
  ids.insert(ids.begin() + static_cast<ptrdiff_t>(again), ids[first]);
  std::string text = "id\n";
  for (int64_t id : ids) text += std::to_string(id) + "\n";
  EXPECT_EQ(NodesError(text), "nodes.csv:" + std::to_string(again + 2) + ":1: duplicate node id " +
                                  std::to_string(ids[first]) + " (first defined on line " +
                                  std::to_string(first + 2) + ")");
  ids.erase(ids.begin() + static_cast<ptrdiff_t>(again));
  text = "id\n";
  for (int64_t id : ids) text += std::to_string(id) + "\n";
  InputGraph graph;
  ASSERT_TRUE(Load(&LoadNodesCsv, "ok.csv", text, &graph).ok());
  ASSERT_EQ(graph.nodes.size(), ids.size());
}

TEST_F(InputTest, CsvSyntaxErrors) {
  EXPECT_EQ(NodesError("id,bio\n1,ok\n2,\"never\nclosed\n3,x\n"),
            "nodes.csv:3:3: unterminated quoted field: the quote opened here is never closed");
  EXPECT_EQ(NodesError("id,bio\n1,say \"hi\"\n"),
            "nodes.csv:2:7: unexpected quote in an unquoted field (a field holding quotes must be "
            "quoted and its quotes doubled)");
  EXPECT_EQ(NodesError("id,bio\n1,\"hi\"there\n"),
            "nodes.csv:2:7: expected a comma or a line end after the closing quote, found \"t\"");
  EXPECT_EQ(EdgesError("src,dst,type,timestamp\n1,2,3,4\r5,6,7,8\n"),
            "edges.csv:2:8: expected a line feed after the carriage return (a field holding a "
            "carriage return must be quoted)");
}

TEST_F(InputTest, InvalidUtf8) {
  EXPECT_EQ(NodesError("id,name\n1,caf\xC3\xA9\n2,caf\xE9\n"),
            "nodes.csv:3:6: invalid UTF-8: byte 0xE9 starts a 3-byte sequence but is followed by "
            "0x0A");
  EXPECT_EQ(NodesError("id,n\xC0\xAF"
                       "me\n"),
            "nodes.csv:1:5: invalid UTF-8: byte 0xC0 never appears in UTF-8 (overlong)");
  EXPECT_EQ(EdgesError("src,dst,type,timestamp,p\n1,2,3,4,\"\xF0\x9F\x99\x82\xED\xB2\x80\"\n"),
            "edges.csv:2:11: invalid UTF-8: bytes 0xED 0xB2 start a UTF-16 surrogate (U+D800 to "
            "U+DFFF)");
  EXPECT_EQ(EdgesError("src,dst,type,timestamp,p\n1,2,3,4,\xF4\x90\x80\x80\n"),
            "edges.csv:2:9: invalid UTF-8: bytes 0xF4 0x90 start a code point above U+10FFFF");
}

TEST_F(InputTest, EdgesBadHeader) {
  EXPECT_EQ(EdgesError(""),
            "edges.csv:1:1: expected a header line src,dst,type,timestamp[,<property>...], found "
            "an empty file");
  EXPECT_EQ(EdgesError("src,dst,type\n1,2,3\n"),
            "edges.csv:1:13: expected the header to start with src,dst,type,timestamp, found 3 "
            "column(s)");
  EXPECT_EQ(EdgesError("src,dest,type,timestamp\n"),
            "edges.csv:1:5: expected header column 2 to be \"dst\", found \"dest\"");
  EXPECT_EQ(EdgesError("dst,src,type,timestamp\n"),
            "edges.csv:1:1: expected header column 1 to be \"src\", found \"dst\"");
  EXPECT_EQ(EdgesError("src,dst,type,time\n"),
            "edges.csv:1:14: expected header column 4 to be \"timestamp\", found \"time\"");
  EXPECT_EQ(EdgesError("1,2,3,4\n"),
            "edges.csv:1:1: expected header column 1 to be \"src\", found \"1\"");
  EXPECT_EQ(EdgesError("src,dst,type,timestamp,\n"),
            "edges.csv:1:24: expected a property name in header column 5, found an empty one");
  EXPECT_EQ(EdgesError("src,dst,type,timestamp,w,w\n"),
            "edges.csv:1:26: duplicate column name \"w\" (also column 5)");
  EXPECT_EQ(EdgesError("src,dst,type,timestamp,type\n"),
            "edges.csv:1:24: duplicate column name \"type\" (also column 3)");
}

TEST_F(InputTest, EdgesBadFields) {
  const std::string h = "src,dst,type,timestamp,w\n";
  EXPECT_EQ(EdgesError(h + "x,2,3,4,\n"),
            "edges.csv:2:1: expected an integer src >= 0, found \"x\"");
  EXPECT_EQ(EdgesError(h + "1,-2,3,4,\n"),
            "edges.csv:2:3: expected an integer dst >= 0, found \"-2\"");
  EXPECT_EQ(EdgesError(h + "1,2,-3,4,\n"),
            "edges.csv:2:5: expected an integer type >= 0, found \"-3\"");
  EXPECT_EQ(EdgesError(h + "1,2,3,+4,\n"),
            "edges.csv:2:7: expected an integer timestamp, found \"+4\"");
  EXPECT_EQ(EdgesError(h + "1,2,3,,\n"),
            "edges.csv:2:7: expected an integer timestamp, found \"\"");
  EXPECT_EQ(EdgesError(h + "1,2,3,-,\n"),
            "edges.csv:2:7: expected an integer timestamp, found \"-\"");
  EXPECT_EQ(EdgesError(h + "1,2,3,--4,\n"),
            "edges.csv:2:7: expected an integer timestamp, found \"--4\"");
  EXPECT_EQ(EdgesError(h + "1,2,3,-9223372036854775809,\n"),
            "edges.csv:2:7: expected an integer timestamp, found \"-9223372036854775809\" (out of "
            "the int64 range)");
  EXPECT_EQ(EdgesError(h + "1,2,3,4\n"),
            "edges.csv:2:8: expected 5 fields as in the header, found 4");
  EXPECT_EQ(EdgesError(h + "1,2,3,4,5,6\n"),
            "edges.csv:2:11: expected 5 fields as in the header, found 6");
}

TEST_F(InputTest, SnapErrors) {
  EXPECT_EQ(SnapError("1 2\n3\n"),
            "edges.txt:2:2: expected a destination node id after the source node id, found the "
            "end of the line");
  EXPECT_EQ(SnapError("1 2\n3 \t\r\n"),
            "edges.txt:2:4: expected a destination node id after the source node id, found the "
            "end of the line");
  EXPECT_EQ(SnapError("1 2 3\n"),
            "edges.txt:1:5: expected the end of the line after \"src dst\", found \"3\"");
  EXPECT_EQ(SnapError("1 2 # note\n"),
            "edges.txt:1:5: expected the end of the line after \"src dst\", found \"#\"");
  EXPECT_EQ(SnapError("# c\n1.5 2\n"),
            "edges.txt:2:1: expected an integer source node id >= 0, found \"1.5\"");
  EXPECT_EQ(SnapError("1\t-2\n"),
            "edges.txt:1:3: expected an integer destination node id >= 0, found \"-2\"");
  EXPECT_EQ(SnapError("1,2\n"),
            "edges.txt:1:1: expected an integer source node id >= 0, found \"1,2\"");
  EXPECT_EQ(SnapError("1 99999999999999999999\n"),
            "edges.txt:1:3: expected an integer destination node id >= 0, found "
            "\"99999999999999999999\" (out of the int64 range)");
  EXPECT_EQ(SnapError("1 2\r3 4\n"),
            "edges.txt:1:4: expected a line feed after the carriage return");
  EXPECT_EQ(SnapError("\xC3\xA9 2\n"),
            "edges.txt:1:1: expected an integer source node id >= 0, found \"\xC3\xA9\"");
}

TEST_F(InputTest, MissingOrUnreadableFile) {
  InputGraph graph;
  const std::string missing = dir_.File("missing.csv");
  for (Loader load : {&LoadNodesCsv, &LoadEdgesCsv, &LoadSnapEdges}) {
    Status s = load(missing, &graph, {});
    EXPECT_EQ(s.code(), StatusCode::kIOError) << s.ToString();
    EXPECT_NE(s.message().find(missing), std::string::npos) << s.message();
    const std::string directory = dir_.File("");
    s = load(directory, &graph, {});
    EXPECT_EQ(s.code(), StatusCode::kIOError) << s.ToString();
    EXPECT_NE(s.message().find(directory), std::string::npos) << s.message();
  }
  EXPECT_TRUE(graph == InputGraph());
}

TEST_F(InputTest, LoadIntoANonEmptyGraphIsRefused) {
  const std::string nodes = dir_.Write("n.csv", "id\n1\n");
  const std::string edges = dir_.Write("e.csv", "src,dst,type,timestamp,w\n1,2,3,4,x\n");
  InputGraph graph;
  ASSERT_TRUE(LoadNodesCsv(nodes, &graph).ok());
  EXPECT_EQ(LoadNodesCsv(nodes, &graph).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(LoadEdgesCsv(edges, &graph).ok());
  EXPECT_EQ(LoadEdgesCsv(edges, &graph).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(graph.nodes.size(), 1u);
  EXPECT_EQ(graph.edges.size(), 1u);
}

TEST_F(InputTest, ReadsFromAPipe) {
  const std::string fifo = dir_.File("nodes.fifo");
  if (::mkfifo(fifo.c_str(), 0600) != 0) GTEST_SKIP() << "mkfifo failed";
  const std::string text = "id,name\n1,a\n2,\"b\nc\"\n";
  std::thread writer([&] {
    std::ofstream out(fifo, std::ios::binary);
    out << text;
  });
  InputGraph graph;
  Status s = LoadNodesCsv(fifo, &graph);
  writer.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(graph.nodes, (std::vector<InputNode>{{1, {{0, "a"}}}, {2, {{0, "b\nc"}}}}));
  EXPECT_EQ(graph.raw_bytes, text.size());
}

// ------------------------------------------------------------------------------------------------
// Progress.

TEST_F(InputTest, ProgressOnceForASmallFile) {
  const std::string text = "src,dst,type,timestamp\n1,2,3,4\n";
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  InputGraph graph;
  ASSERT_TRUE(LoadEdgesCsv(dir_.Write("e.csv", text), &graph, [&](uint64_t done, uint64_t total) {
                calls.emplace_back(done, total);
              }).ok());
  EXPECT_EQ(calls, (std::vector<std::pair<uint64_t, uint64_t>>{{text.size(), text.size()}}));
}

TEST_F(InputTest, ProgressGrowsToTheTotalForALargeFile) {
  std::string nodes = "id,v\n", snap;
  for (int i = 0; nodes.size() < (18u << 20); ++i) {
    nodes += std::to_string(i) + ",value " + std::to_string(i * 7) + "\n";
  }
  for (int i = 0; snap.size() < (10u << 20); ++i) snap += std::to_string(i) + "\t1\n";
  const std::vector<std::pair<Loader, std::string>> cases = {
      {&LoadNodesCsv, dir_.Write("big.csv", nodes)}, {&LoadSnapEdges, dir_.Write("big.txt", snap)}};
  for (const auto& [load, path] : cases) {
    const uint64_t size = std::filesystem::file_size(path);
    std::vector<std::pair<uint64_t, uint64_t>> calls;
    InputGraph graph;
    ASSERT_TRUE(load(path, &graph, [&](uint64_t done, uint64_t total) {
                  calls.emplace_back(done, total);
                }).ok());
    ASSERT_GE(calls.size(), 3u) << path;
    EXPECT_EQ(calls.back(), std::make_pair(size, size));
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(calls[i].second, size);
      if (i > 0) {
        EXPECT_GT(calls[i].first, calls[i - 1].first);
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Randomized round trips.

// A random value: empty, plain, or full of what CSV has to quote, and any UTF-8.
std::string RandomValue(std::mt19937_64& rng) {
  static const std::vector<std::string> pieces = {
      "a",
      "Z",
      "7",
      " ",
      ",",
      "\"",
      "\"\"",
      "\n",
      "\r\n",
      "\r",
      "\t",
      "-",
      "#",
      "\\",
      "x,y",
      std::string("\0", 1),
      "\x01",
      "\x7F",
      "\xC3\xA9",          // é
      "\xE6\x97\xA5",      // 日
      "\xEF\xBF\xBD",      // U+FFFD
      "\xEF\xBB\xBF",      // U+FEFF
      "\xF0\x9F\x99\x82",  // 🙂
      "\xF4\x8F\xBF\xBF",  // U+10FFFF
      "\xC2\x80",
      "\xED\x9F\xBF",  // U+0080, U+D7FF
  };
  switch (rng() % 4) {
    case 0:
      return "";
    case 1: {  // plain
      std::string v;
      for (size_t n = 1 + rng() % 12; n > 0; --n) v += static_cast<char>('a' + rng() % 26);
      return v;
    }
    default: {
      std::string v;
      for (size_t n = 1 + rng() % 10; n > 0; --n) v += pieces[rng() % pieces.size()];
      return v;
    }
  }
}

// `value` as an RFC 4180 field: quoted when it must be, and sometimes when it need not be.
std::string CsvField(const std::string& value, std::mt19937_64& rng) {
  const bool must = value.find_first_of(",\"\r\n") != std::string::npos;
  if (!must && rng() % 5 != 0) return value;
  std::string out = "\"";
  for (char c : value) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

int64_t RandomInt(std::mt19937_64& rng, bool allow_negative) {
  switch (rng() % 4) {
    case 0:
      return static_cast<int64_t>(rng() % 100);
    case 1:
      return allow_negative ? std::numeric_limits<int64_t>::min() + static_cast<int64_t>(rng() % 3)
                            : std::numeric_limits<int64_t>::max() - static_cast<int64_t>(rng() % 3);
    default: {
      const int64_t v = static_cast<int64_t>(rng() >> 1);
      return allow_negative && rng() % 2 ? -v : v;
    }
  }
}

std::string LineEnd(std::mt19937_64& rng) { return rng() % 2 ? "\n" : "\r\n"; }

TEST_F(InputTest, RandomNodesRoundTrip) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    const size_t num_props = rng() % 6;
    std::vector<std::string> names;
    std::string text = rng() % 3 == 0 ? "\xEF\xBB\xBF" : "";
    text += "id";
    for (size_t p = 0; p < num_props; ++p) {
      names.push_back(
          std::string(1, 'p').append(std::to_string(p)).append(p % 2 ? ",\xC3\xA9" : ""));
      text += ',';
      text += CsvField(names.back(), rng);
    }
    text += LineEnd(rng);
    const size_t num_nodes = rng() % 400;
    std::vector<int64_t> ids(num_nodes);
    std::iota(ids.begin(), ids.end(), 0);
    for (int64_t& id : ids) id = id * 3 + static_cast<int64_t>(rng() % 3);  // distinct
    if (seed % 2 == 0) std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<InputNode> want;
    for (size_t i = 0; i < num_nodes; ++i) {
      InputNode node{ids[i], {}};
      text += rng() % 10 == 0 ? "\"" + std::to_string(node.id) + "\"" : std::to_string(node.id);
      for (size_t p = 0; p < num_props; ++p) {
        const std::string v = RandomValue(rng);
        text += ',';
        text += CsvField(v, rng);
        if (!v.empty()) node.properties.emplace_back(static_cast<uint32_t>(p), v);
      }
      if (i + 1 < num_nodes || rng() % 2) text += LineEnd(rng);  // last line ending optional
      if (rng() % 20 == 0) text += LineEnd(rng);                 // a blank line
      want.push_back(std::move(node));
    }
    InputGraph graph;
    Status s = Load(&LoadNodesCsv, "nodes.csv", text, &graph);
    ASSERT_TRUE(s.ok()) << "seed " << seed << ": " << s.ToString();
    EXPECT_EQ(graph.node_property_names, names) << "seed " << seed;
    ASSERT_EQ(graph.nodes.size(), want.size()) << "seed " << seed;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(graph.nodes[i], want[i]) << "seed " << seed << " node " << i;
    }
    EXPECT_EQ(graph.raw_bytes, text.size());
  }
}

TEST_F(InputTest, RandomEdgesRoundTrip) {
  for (uint64_t seed = 100; seed < 120; ++seed) {
    std::mt19937_64 rng(seed);
    const size_t num_props = rng() % 4;
    std::vector<std::string> names;
    std::string text = "src,dst,type,\"timestamp\"";
    for (size_t p = 0; p < num_props; ++p) {
      names.push_back("\"w\"" + std::to_string(p));
      text += ',';
      text += CsvField(names.back(), rng);
    }
    text += LineEnd(rng);
    std::vector<InputEdge> want;
    const size_t num_edges = rng() % 400;
    for (size_t i = 0; i < num_edges; ++i) {
      InputEdge e{RandomInt(rng, false),
                  RandomInt(rng, false),
                  RandomInt(rng, false),
                  RandomInt(rng, true),
                  {}};
      text += std::to_string(e.src) + "," + std::to_string(e.dst) + "," + std::to_string(e.type) +
              "," + CsvField(std::to_string(e.timestamp), rng);
      for (size_t p = 0; p < num_props; ++p) {
        const std::string v = RandomValue(rng);
        text += ',';
        text += CsvField(v, rng);
        if (!v.empty()) e.properties.emplace_back(static_cast<uint32_t>(p), v);
      }
      if (i + 1 < num_edges || rng() % 2) text += LineEnd(rng);
      want.push_back(std::move(e));
    }
    InputGraph graph;
    Status s = Load(&LoadEdgesCsv, "edges.csv", text, &graph);
    ASSERT_TRUE(s.ok()) << "seed " << seed << ": " << s.ToString();
    EXPECT_EQ(graph.edge_property_names, names) << "seed " << seed;
    ASSERT_EQ(graph.edges.size(), want.size()) << "seed " << seed;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(graph.edges[i], want[i]) << "seed " << seed << " edge " << i;
    }
  }
}

TEST_F(InputTest, RandomSnapRoundTrip) {
  for (uint64_t seed = 200; seed < 220; ++seed) {
    std::mt19937_64 rng(seed);
    auto blanks = [&](bool at_least_one) {
      std::string b = at_least_one ? (rng() % 2 ? " " : "\t") : "";
      for (size_t n = rng() % 3; n > 0; --n) b += rng() % 2 ? " " : "\t";
      return b;
    };
    std::string text;
    std::vector<InputEdge> want;
    const size_t lines = rng() % 500;
    for (size_t i = 0; i < lines; ++i) {
      switch (rng() % 8) {
        case 0:
          text += blanks(false) + "# comment 1 2 3 \xF0\x9F\x99\x82";
          break;
        case 1:
          text += blanks(false);
          break;
        default: {
          InputEdge e{RandomInt(rng, false), RandomInt(rng, false), 0, 0, {}};
          text += blanks(false) + std::to_string(e.src) + blanks(true) + std::to_string(e.dst) +
                  blanks(false);
          want.push_back(e);
        }
      }
      if (i + 1 < lines || rng() % 2) text += LineEnd(rng);
    }
    InputGraph graph;
    Status s = Load(&LoadSnapEdges, "edges.txt", text, &graph);
    ASSERT_TRUE(s.ok()) << "seed " << seed << ": " << s.ToString();
    EXPECT_EQ(graph.edges, want) << "seed " << seed;
  }
}

}  // namespace
}  // namespace zipg::graph
