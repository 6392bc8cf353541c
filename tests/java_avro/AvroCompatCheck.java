import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.avro.Schema;
import org.apache.avro.SchemaCompatibility;

/**
 * Apache Avro's own verdicts for the schema registry's Avro tests, many at once in one JVM.
 *
 * <p>stdin: one JSON array of jobs, each an object with an "id" and either
 * {"op": "compat", "reader": text, "reader_refs": [text...], "writer": text, "writer_refs":
 * [text...]} (SchemaCompatibility's verdict on reading writer's data with reader) or {"op": "parse", "refs": [text...],
 * "schema": text} (whether Schema.Parser accepts it, and Schema.toString as Avro prints it, with
 * the referenced named types printed as names). The "refs" lists are schemas parsed first into the same
 * parser, the way Confluent resolves Avro references.
 *
 * <p>stdout: one JSON object per job, in order: {"id", "ok": true, "result": "COMPATIBLE" |
 * "INCOMPATIBLE", "incompatibilities": [{"type", "location", "message"}]} or {"id", "ok": true,
 * "canonical": text}, or {"id", "ok": false, "error": message} when a schema does not parse.
 */
public final class AvroCompatCheck {
  private static final ObjectMapper JSON = new ObjectMapper();

  private AvroCompatCheck() {}

  /** The schema and the named types its references define, parsed with one parser. */
  private record Parsed(Schema schema, List<Schema> referenced) {}

  private static Parsed parse(JsonNode refs, String text) {
    Schema.Parser parser = new Schema.Parser();
    List<Schema> referenced = new ArrayList<>();
    if (refs != null) {
      for (JsonNode ref : refs) {
        referenced.add(parser.parse(ref.asText()));
      }
    }
    return new Parsed(parser.parse(text), referenced);
  }

  private static ObjectNode run(JsonNode job) {
    ObjectNode out = JSON.createObjectNode();
    out.set("id", job.get("id"));
    try {
      String op = job.get("op").asText();
      if (op.equals("parse")) {
        Parsed parsed = parse(job.get("refs"), job.get("schema").asText());
        out.put("ok", true);
        out.put("canonical", parsed.schema().toString(parsed.referenced(), false));
        return out;
      }
      // Reader and writer each with their own references (a referenced type may have evolved).
      Schema reader = parse(job.get("reader_refs"), job.get("reader").asText()).schema();
      Schema writer = parse(job.get("writer_refs"), job.get("writer").asText()).schema();
      SchemaCompatibility.SchemaCompatibilityResult result =
          SchemaCompatibility.checkReaderWriterCompatibility(reader, writer).getResult();
      out.put("ok", true);
      out.put("result", result.getCompatibility().name());
      ArrayNode list = out.putArray("incompatibilities");
      for (SchemaCompatibility.Incompatibility incompatibility : result.getIncompatibilities()) {
        ObjectNode item = list.addObject();
        item.put("type", incompatibility.getType().name());
        item.put("location", incompatibility.getLocation());
        item.put("message", incompatibility.getMessage());
      }
    } catch (RuntimeException e) {
      // SchemaParseException and AvroTypeException: the schema text is not valid Avro.
      out.put("ok", false);
      out.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
    }
    return out;
  }

  public static void main(String[] args) throws IOException {
    JsonNode jobs = JSON.readTree(System.in);
    PrintStream stdout = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    for (JsonNode job : jobs) {
      stdout.println(JSON.writeValueAsString(run(job)));
    }
    stdout.flush();
  }
}
