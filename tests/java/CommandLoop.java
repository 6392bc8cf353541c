import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The line protocol the Python tests script the Java programs with (tests/support/java_programs.py):
 * one command per line on stdin, words separated by spaces; exactly one JSON line on stdout for each,
 * {@code {"ok": true, ..., "op": "<command>"}} or
 * {@code {"ok": false, "error": "<exception class>", "chain": [...], "message": "...", "op": ...}}.
 * The loop ends with the input.
 */
final class CommandLoop {
    /** One program's commands: the answer's fields, or an exception for a failed command. */
    interface Commands {
        Map<String, Object> execute(String[] words) throws Exception;
    }

    private CommandLoop() {
    }

    /** The single argument, the bootstrap servers; exits with usage when it is not given. */
    static String bootstrap(String program, String[] args) {
        if (args.length != 1) {
            System.err.println("usage: " + program + " <bootstrap servers>");
            System.exit(2);
        }
        return args[0];
    }

    static void run(Commands commands) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] words = line.split("\\s+");
            Map<String, Object> answer;
            try {
                answer = commands.execute(words);
                answer.put("ok", true);
            } catch (Exception e) {
                answer = failure(e);
            }
            answer.put("op", words[0]);
            System.out.println(Json.write(answer));
            System.out.flush();
        }
    }

    static Map<String, Object> failure(Throwable e) {
        Map<String, Object> answer = new LinkedHashMap<>();
        answer.put("ok", false);
        answer.put("error", e.getClass().getSimpleName());
        List<Object> chain = new ArrayList<>();
        for (Throwable t = e; t != null && chain.size() < 10; t = t.getCause()) {
            chain.add(t.getClass().getSimpleName());
        }
        answer.put("chain", chain);
        answer.put("message", String.valueOf(e.getMessage()));
        return answer;
    }
}
