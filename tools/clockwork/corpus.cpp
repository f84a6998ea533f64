// The English text the tiny tokenizers are trained on. It only has to be ordinary prose, varied
// enough that byte-level BPE learns a few hundred word pieces from it (common words, suffixes,
// spaces before words, punctuation, digits).
#include "tools/clockwork/corpus.h"

namespace clockwork::cli {

std::string_view training_corpus() {
  static constexpr std::string_view kText =
      R"(The clock in the hall had not been wound for years, yet every morning it seemed to show a different time. Nobody in the house could explain it. The children said that the clock was alive; their grandmother said that the house was old and the floor was not level, and that a pendulum on a tilted floor will swing where it pleases.

On the first day of spring the weather turned warm. The river below the village rose with melted snow, and the fishermen waited on the bridge, watching the water carry branches, leaves and the occasional lost boot towards the sea. By the afternoon the sun had dried the road, and the market filled with people selling bread, cheese, apples, onions, honey and wool.

A computer does not think the way a person does. It follows instructions, one after another, very quickly. A program is a list of such instructions, written by people who had to imagine every situation the machine would meet. When the program is wrong, the machine does exactly what it was told, and the result is wrong in exactly the way the program describes.

Learning to read a language model is like learning to read a map. The model turns text into numbers called tokens, and each token into a vector of numbers. Every layer of the model mixes these vectors: attention lets each position look back at the positions before it, and the feed-forward network transforms each position on its own. After the last layer, the model gives a score to every token in its vocabulary, and the highest score wins.

"Where are you going?" asked the baker. "To the station," said the young woman, "the train leaves at seven, and I still have to buy a ticket." The baker wrapped two warm rolls in paper and handed them over. "Then take these. Nobody should travel hungry." She thanked him, laughed, and ran down the street with her bag bouncing against her shoulder.

There are twelve months in a year, seven days in a week, twenty-four hours in a day and sixty minutes in an hour. In 1582 several countries changed their calendar, and ten days disappeared between one Thursday and the next Friday. People were told to go to bed on the fourth of October and wake up on the fifteenth. Some were worried that they had lost ten days of their lives; others were happy to pay ten days less rent.

The garden behind the school was small, but it was full of life. Bees moved between the flowers, birds argued in the hedge, and a cat slept on the warm stones by the wall. The teacher brought the class outside to count the insects they could find, and by the end of the hour they had found beetles, ants, spiders, butterflies and one very surprised frog.

Good software is tested. A test states what a piece of code should do, runs it, and compares the answer with the expected one. When the answer differs, a good test says why: which value was wrong, where it was found, and what it should have been. Students learn faster from a message that explains the mistake than from a message that only says that something failed.

The mountain road climbed slowly through the forest. At every turn the view opened a little more: first the roofs of the village, then the lake, then the distant line of hills that marked the border. The travellers stopped at a spring to fill their bottles. The water was so cold that it hurt their teeth, and so clear that they could see every stone at the bottom.

Numbers can be written in many ways. The number one thousand two hundred and thirty-four is written 1234, and half of it is 617. A computer stores numbers in binary, as a row of bits, and a floating-point number keeps a sign, an exponent and a fraction. The fewer bits it keeps, the less precise the number is, but the faster it can be moved and multiplied.

She opened the letter carefully, as if the paper might break. It was from her brother, who had been working on a ship for three years. He wrote about storms and harbours, about the food on board and the friends he had made, and at the end he wrote that he was coming home in the summer, and that he would bring her a present from every port.

When you cook rice, wash it first, then put it in a pot with water, bring the water to the boil, cover the pot and let it simmer on a low heat until the water is gone. Do not lift the lid too often. When the rice is ready, let it rest for a few minutes before you serve it. The same patience that makes good rice also makes good bread, good soup and good code.

The library opened at nine o'clock. Inside it was quiet and smelled of paper and floor polish. An old man read the newspaper by the window, a student wrote notes in a thick notebook, and a small boy sat on the carpet with a book about dinosaurs that was almost as big as he was. The librarian smiled at each of them and went on sorting the returned books.

Why is the sky blue? Sunlight contains every colour, and when it passes through the air, the short blue waves are scattered much more than the long red ones. So blue light reaches our eyes from every part of the sky. At sunset the light travels through more air, most of the blue is scattered away before it reaches us, and the sky near the sun turns orange and red.

It's easy to say that something is simple once you've understood it. It wasn't simple when you started, and it won't be simple for the next person who tries. That's why we write explanations, draw pictures and give examples: they're the bridge that lets another person cross the river we've already crossed.

The town council met on Tuesday evening to discuss the new bridge. Some members wanted a wide bridge for cars and lorries; others wanted a narrow one for people and bicycles. After two hours of discussion they agreed to build a bridge with a road in the middle and a path on each side, and to paint it green, because nobody could agree on any other colour.

In the morning the fog was so thick that the harbour seemed to have disappeared. The boats waited at their moorings, the gulls were silent, and the only sound was the slow bell of the buoy at the mouth of the bay. By ten o'clock the sun had burnt the fog away, and the whole harbour appeared again, bright and busy, as if nothing had happened.

Every model has parameters, and every parameter is a number that was learned from data. A small model might have a few thousand of them; a large one has billions. Before training, the parameters are random, and the model produces nonsense. Training changes them a little at a time, so that the model's guesses about the next word become better and better.

The old map showed a road that no longer existed, a mill that had burnt down a hundred years ago, and a bridge that had been washed away by a flood. Still, the hills were where the map said they would be, and the river followed the same curve. Maps grow old, but the land they describe changes slowly, and a patient traveller can still find the way.)";
  return kText;
}

}  // namespace clockwork::cli
