// Remarks: what lowering did with a schedule's requests (vectorize, unroll, pipeline and its
// cp.async copies), as LLVM's optimization remarks (-Rpass / -Rpass-missed) say what a loop
// vectorizer did. A request that was not applied is never an error (the fallback is correct,
// only slower), so it would otherwise go unnoticed: lower() logs each missed one as a warning,
// keeps every remark in LoweredModule::remarks, and LowerOptions::print_remarks (`tessel lower
// --remarks`) lists them all.
//
//   remarks->missed("vectorize_loops", "vectorize of axis 'j.inner' of stage 'B' (4 lanes) not "
//                   "applied: ...");
#pragma once

#include <string>
#include <vector>

namespace tessel {

struct Remark {
  /// Missed: a request that was not applied (a warning). Note: one with nothing to do (a
  /// pipeline whose loop runs once), listed with the others but not a warning.
  enum class Kind { Applied, Missed, Note };
  Kind kind = Kind::Applied;
  std::string step;    ///< the lowering step that decided ("vectorize_loops", "pipeline", ...)
  std::string message; ///< a sentence naming the stage, the axis or buffer and, if missed, why

  /// "remark: vectorize_loops: ..." (applied), "remark: vectorize_loops: missed: ..." or
  /// "remark: pipeline: note: ...".
  std::string str() const;
};

/// Where passes report their remarks. A pass takes a `Remarks *`; null reports nothing.
class Remarks {
public:
  void applied(std::string step, std::string message);
  void missed(std::string step, std::string message);
  void note(std::string step, std::string message);

  const std::vector<Remark> &list() const { return list_; }

private:
  std::vector<Remark> list_;
};

} // namespace tessel
