package livectl.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.util.LongAccumulator;

/**
 * The controller's figures after a micro-batch, shown in Spark's Stages tab and REST API.
 *
 * <p>A named accumulator appears in a stage only when a task of that stage adds to it, and only JVM code
 * running in the task can. So this is a Java UDF, registered from Python with PySpark's public
 * {@code spark.udf.registerJavaFunction}, which makes one instance on the driver: its constructor reads the
 * figures from the registering thread's local property {@value #FIGURES_PROPERTY} and registers one named
 * {@link LongAccumulator} per figure; a one-row query of one task then calls it, and the call adds each
 * figure to its accumulator. The stage lists {@code livectl.OfflinePartitionsCount = 3}, and so on, under
 * the job description the caller set. One instance (fresh accumulators) per batch: each stage shows its
 * own batch's figures, never a sum over batches.
 */
public final class BatchFigures implements UDF1<Long, Long> {
  private static final long serialVersionUID = 2L;

  /** The prefix of every accumulator name. */
  public static final String PREFIX = "livectl.";

  /**
   * The local property the figures are read from: one per line, {@code Name<TAB>value} (value a whole
   * number); the accumulator is named {@code livectl.Name}.
   */
  public static final String FIGURES_PROPERTY = "livectl.figures";

  private final LongAccumulator[] accumulators;
  private final long[] amounts;

  /**
   * Registers the accumulators of the figures in the calling thread's {@value #FIGURES_PROPERTY}.
   *
   * @throws IllegalArgumentException naming the line, when a line is not {@code Name<TAB>value}, or when the
   *     property is not set
   */
  public BatchFigures() {
    SparkContext sc = SparkContext.getOrCreate();
    String figures = sc.getLocalProperty(FIGURES_PROPERTY);
    if (figures == null) {
      throw new IllegalArgumentException("local property " + FIGURES_PROPERTY + " is not set");
    }
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
    accumulators = new LongAccumulator[names.size()];
    amounts = new long[names.size()];
    for (int i = 0; i < accumulators.length; i++) {
      accumulators[i] = sc.longAccumulator(PREFIX + names.get(i));
      amounts[i] = values.get(i);
    }
  }

  /** Adds each figure to its accumulator (in the task); returns {@code row} unchanged. */
  @Override
  public Long call(Long row) {
    for (int i = 0; i < accumulators.length; i++) {
      accumulators[i].add(amounts[i]);
    }
    return row;
  }
}
