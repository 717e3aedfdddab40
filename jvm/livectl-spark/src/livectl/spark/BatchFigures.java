package livectl.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.apache.spark.SparkContext;
import org.apache.spark.api.java.JavaFutureAction;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.VoidFunction;
import org.apache.spark.util.LongAccumulator;

/**
 * The controller's figures after a micro-batch, shown in Spark's Stages tab and REST API.
 *
 * <p>A named accumulator appears in a stage only when a task of that stage adds to it, and only JVM code
 * running in the task can: so {@link #publishAsync} registers one named {@link LongAccumulator} per figure and
 * runs a job of one task whose task adds each figure to its accumulator. The stage then lists
 * {@code livectl.OfflinePartitionsCount = 3}, and so on, under the job description the caller set.
 * Fresh accumulators per call: each stage shows its own batch's figures, never a sum over batches.
 */
public final class BatchFigures {
  /** The prefix of every accumulator name. */
  public static final String PREFIX = "livectl.";

  private BatchFigures() {}

  /**
   * Submits the one-task job that shows {@code figures} as named accumulators, without waiting for it.
   *
   * @param sc the application's SparkContext (the caller sets the job description and call site: they
   *     are taken when the job is submitted, before this returns)
   * @param figures one figure per line, {@code Name<TAB>value} (value a whole number); the accumulator is
   *     named {@code livectl.Name}
   * @return the job's future ({@code get()} waits for the task)
   * @throws IllegalArgumentException naming the line, when a line is not {@code Name<TAB>value}
   */
  public static JavaFutureAction<Void> publishAsync(SparkContext sc, String figures) {
    List<String> names = new ArrayList<>();
    List<Long> values = new ArrayList<>();
    int lineNo = 0;
    for (String line : figures.split("\n", -1)) {
      lineNo++;
      if (line.isEmpty()) {
        continue;
      }
      int tab = line.indexOf('\t');
      if (tab <= 0) {
        throw new IllegalArgumentException(
            "figures line " + lineNo + ": expected Name<TAB>value, got '" + line + "'");
      }
      String value = line.substring(tab + 1);
      try {
        values.add(Long.parseLong(value));
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(
            "figures line " + lineNo + ": value of " + line.substring(0, tab) + " is not a whole number: '"
                + value + "'");
      }
      names.add(line.substring(0, tab));
    }
    LongAccumulator[] accumulators = new LongAccumulator[names.size()];
    long[] amounts = new long[names.size()];
    for (int i = 0; i < accumulators.length; i++) {
      accumulators[i] = sc.longAccumulator(PREFIX + names.get(i));
      amounts[i] = values.get(i);
    }
    return JavaSparkContext.fromSparkContext(sc)
        .parallelize(Collections.singletonList(0), 1)
        .foreachAsync(new Add(accumulators, amounts));
  }

  /** The task: adds each figure to its accumulator (the task's copy, merged into the driver's). */
  private static final class Add implements VoidFunction<Integer>, Serializable {
    private static final long serialVersionUID = 1L;
    private final LongAccumulator[] accumulators;
    private final long[] amounts;

    Add(LongAccumulator[] accumulators, long[] amounts) {
      this.accumulators = accumulators;
      this.amounts = amounts;
    }

    @Override
    public void call(Integer ignored) {
      for (int i = 0; i < accumulators.length; i++) {
        accumulators[i].add(amounts[i]);
      }
    }
  }
}
