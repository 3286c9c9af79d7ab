"""Weight quantization: the formats, their packed linear layers, the quantized copy of a model, and the report
that measures their size, speed and quality."""
