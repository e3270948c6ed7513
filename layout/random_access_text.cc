// OpenRecordText: the one place that picks a record text's kind by its file's format.

#include "layout/random_access_text.h"

#include "layout/block_file.h"
#include "layout/compressed_file.h"

namespace zipg::layout {

StatusOr<std::unique_ptr<RandomAccessText>> OpenRecordText(const std::string& path, bool blocks,
                                                           const OpenOptions& options,
                                                           const CompressedFile** suffix) {
  *suffix = nullptr;
  if (blocks) {
    ZIPG_ASSIGN_OR_RETURN(std::unique_ptr<BlockFile> file, BlockFile::Open(path, options));
    return std::unique_ptr<RandomAccessText>(std::move(file));
  }
  ZIPG_ASSIGN_OR_RETURN(std::unique_ptr<CompressedFile> file, CompressedFile::Open(path, options));
  *suffix = file.get();
  return std::unique_ptr<RandomAccessText>(std::move(file));
}

}  // namespace zipg::layout
