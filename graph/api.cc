// The default write batch (graph/api.h): one single call per write.

#include "graph/api.h"

namespace zipg {

StatusOr<bool> ApplyWrite(GraphWriteApi& g, const Write& w) {
  switch (w.op) {
    case Write::Op::kObjAdd:
      ZIPG_RETURN_IF_ERROR(g.ObjAdd(w.id, w.properties));
      return false;
    case Write::Op::kObjUpdate:
      ZIPG_RETURN_IF_ERROR(g.ObjUpdate(w.id, w.properties));
      return false;
    case Write::Op::kObjDelete:
      return g.ObjDelete(w.id);
    case Write::Op::kAssocAdd:
      return g.AssocAdd(Edge{w.id, w.type, w.dst, w.timestamp, w.properties});
    case Write::Op::kAssocUpdate:
      ZIPG_RETURN_IF_ERROR(g.AssocUpdate(Edge{w.id, w.type, w.dst, w.timestamp, w.properties}));
      return false;
    case Write::Op::kAssocDelete:
      return g.AssocDelete(w.id, w.type, w.dst);
  }
  return Status::InvalidArgument("unknown write");
}

std::vector<StatusOr<bool>> GraphWriteApi::WriteBatch(const std::vector<Write>& writes) {
  std::vector<StatusOr<bool>> out;
  out.reserve(writes.size());
  for (const Write& w : writes) out.push_back(ApplyWrite(*this, w));
  return out;
}

}  // namespace zipg
