// The "text" string of one JSON object per line, with escapes decoded, while checking and
// skipping any other fields (nested or not), through the strict reader of util/json_cursor.h.
#include <string>

#include "data/sources.h"
#include "util/json_cursor.h"

namespace titan {

std::string json_text_field(const std::string& line) {
  JsonCursor cur(line);
  cur.expect('{');
  bool found = false;
  std::string text;
  if (cur.peek() == '}') cur.fail("object has no \"text\" field");
  while (true) {
    std::string key;
    cur.string(&key);
    cur.expect(':');
    if (key == "text" && found) cur.fail("duplicate \"text\" field");
    if (key == "text" && cur.peek() == '"') {
      cur.string(&text);
      found = true;
    } else if (key == "text") {
      cur.fail("\"text\" is not a string");
    } else {
      cur.skip_value();
    }
    if (cur.peek() == ',') {
      cur.expect(',');
      continue;
    }
    cur.expect('}');
    break;
  }
  if (!cur.at_end()) cur.fail("trailing characters after the object");
  if (!found) throw JsonSyntaxError("object has no \"text\" field", line.size() + 1);
  return text;
}

}  // namespace titan
